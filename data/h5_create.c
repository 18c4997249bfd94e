// data/h5_create.c: reproducible HDF5 creation properties (see h5_create.h).
#include "data/h5_create.h"

// File access: objects in the HDF5 1.8 format whatever the library's
// default, so a newer HDF5 writes the same bytes as an older one.
static hid_t file_access(void) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18) < 0) {
    H5Pclose(fapl);
    return -1;
  }
  return fapl;
}

// A creation property list of class cls with object timestamps off.
static hid_t untimed(hid_t cls) {
  hid_t plist = H5Pcreate(cls);
  if (plist >= 0 && H5Pset_obj_track_times(plist, 0) < 0) {
    H5Pclose(plist);
    return -1;
  }
  return plist;
}

hid_t h5_create_file(const char *path) {
  hid_t fcpl = untimed(H5P_FILE_CREATE);  // the root group's properties
  hid_t fapl = file_access();
  hid_t file = fcpl >= 0 && fapl >= 0 ? H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl) : -1;
  if (fcpl >= 0) H5Pclose(fcpl);
  if (fapl >= 0) H5Pclose(fapl);
  return file;
}

hid_t h5_open_file_rw(const char *path) {
  hid_t fapl = file_access();
  hid_t file = fapl >= 0 ? H5Fopen(path, H5F_ACC_RDWR, fapl) : -1;
  if (fapl >= 0) H5Pclose(fapl);
  return file;
}

hid_t h5_create_group(hid_t loc, const char *name) {
  hid_t gcpl = untimed(H5P_GROUP_CREATE);
  hid_t g = gcpl >= 0 ? H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT) : -1;
  if (gcpl >= 0) H5Pclose(gcpl);
  return g;
}

hid_t h5_create_dataset(hid_t loc, const char *name, hid_t type, hid_t space) {
  hid_t dcpl = untimed(H5P_DATASET_CREATE);
  hid_t ds = dcpl >= 0 ? H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
  if (dcpl >= 0) H5Pclose(dcpl);
  return ds;
}
