// data/dataset_internal.h: what data/dataset_write.c and data/dataset_read.c
// share (not a public API): field names per kind, HDF5 array/attribute
// helpers and the tokenizer file hash.
#ifndef FIMI_DATA_DATASET_INTERNAL_H
#define FIMI_DATA_DATASET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "core/error.h"
#include "data/dataset.h"

int dataset_internal_num_fields(DatasetKind kind);
const char *dataset_internal_field_name(DatasetKind kind, int i);
// A 1-D dataset `name` of n elements under loc.
int h5_write_array(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *data, uint64_t n,
                   FimiError *err);
// A scalar integer attribute of loc.
int dataset_internal_read_int_attr(hid_t loc, const char *name, int64_t *out, FimiError *err);
// FNV-1a 64-bit hash of bytes as 16 lowercase hex digits.
void dataset_internal_fnv1a64_hex(const void *data, size_t n, char out[17]);

#endif
