// data/h5_create.h: how fimi creates HDF5 files, groups and datasets so that
// the same content always gives the same bytes: no object timestamps (HDF5
// stores the creation and modification time of every group and dataset by
// default), fixed file-creation properties and a fixed file-format range
// (HDF5 1.8 objects, readable by h5py and any HDF5 >= 1.8). Datasets and
// optimizer checkpoints written twice from the same state compare equal with
// cmp. Every HDF5 writer in fimi goes through these; each returns a handle
// (close it with H5Fclose / H5Gclose / H5Dclose) or a negative value.
#ifndef FIMI_DATA_H5_CREATE_H
#define FIMI_DATA_H5_CREATE_H

#include <hdf5.h>

// Creates (truncates) path.
hid_t h5_create_file(const char *path);
// Opens an existing file for writing, with the format range of h5_create_file.
hid_t h5_open_file_rw(const char *path);
hid_t h5_create_group(hid_t loc, const char *name);
// A contiguous dataset of file type `type` and dataspace `space`.
hid_t h5_create_dataset(hid_t loc, const char *name, hid_t type, hid_t space);

#endif
