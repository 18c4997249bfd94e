// data/dataset_read.c: the validating dataset reader (dataset_open,
// dataset_row) and the loader that shuffles per epoch, shards by rank and
// keeps a resumable cursor (dataset_loader_*). The file is untrusted: types,
// shapes, offsets, ids and mask values are all checked before use, and every
// error names the file, the dataset and the row.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "core/rng.h"
#include "data/dataset.h"
#include "data/dataset_internal.h"

// More elements than this in one dataset is treated as corruption (a
// damaged dims field must not turn into a huge allocation).
#define DATASET_MAX_ELEMENTS ((uint64_t)1 << 36)

int dataset_internal_read_int_attr(hid_t loc, const char *name, int64_t *out, FimiError *err) {
  if (H5Aexists(loc, name) <= 0) return fimi_fail(err, "attribute \"%s\" is missing", name);
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return fimi_fail(err, "attribute \"%s\" cannot be opened", name);
  hid_t type = H5Aget_type(a), space = H5Aget_space(a);
  int ok = type >= 0 && space >= 0 && H5Tget_class(type) == H5T_INTEGER && H5Sget_simple_extent_npoints(space) == 1 &&
           H5Aread(a, H5T_NATIVE_INT64, out) >= 0;
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return ok ? 0 : fimi_fail(err, "attribute \"%s\" is not one integer", name);
}

// A string attribute (variable or fixed length) into out; optional ones
// that are missing leave out empty.
static int read_string_attr(hid_t loc, const char *name, int required, char *out, size_t out_size, FimiError *err) {
  out[0] = '\0';
  if (H5Aexists(loc, name) <= 0) return required ? fimi_fail(err, "attribute \"%s\" is missing", name) : 0;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return fimi_fail(err, "attribute \"%s\" cannot be opened", name);
  hid_t type = H5Aget_type(a), space = H5Aget_space(a);
  int ok = type >= 0 && space >= 0 && H5Tget_class(type) == H5T_STRING && H5Sget_simple_extent_npoints(space) == 1;
  if (ok && H5Tis_variable_str(type) > 0) {
    char *value = NULL;
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    ok = H5Aread(a, mem, &value) >= 0 && value;
    if (ok) snprintf(out, out_size, "%s", value);
    if (value) H5free_memory(value);
    H5Tclose(mem);
  } else if (ok) {
    size_t size = H5Tget_size(type);
    char *buf = calloc(size + 1, 1);
    hid_t mem = H5Tcopy(type);
    ok = buf && mem >= 0 && H5Aread(a, mem, buf) >= 0;
    if (ok) snprintf(out, out_size, "%s", buf);
    free(buf);
    if (mem >= 0) H5Tclose(mem);
  }
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return ok ? 0 : fimi_fail(err, "attribute \"%s\" is not a string", name);
}

// Reads the 1-D dataset `name` (under loc) whose stored type must be of
// class `cls` and `size` bytes, converted to mem_type, into a malloc'd array.
static int read_array(hid_t loc, const char *name, H5T_class_t cls, size_t size, hid_t mem_type, void **data,
                      uint64_t *n, FimiError *err) {
  *data = NULL;
  *n = 0;
  if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) return fimi_fail(err, "dataset \"%s\" is missing", name);
  hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
  if (ds < 0) return fimi_fail(err, "\"%s\" is not a dataset", name);
  hid_t type = H5Dget_type(ds), space = H5Dget_space(ds);
  int rc = 0;
  hsize_t dims[1] = {0};
  if (type < 0 || space < 0) rc = fimi_fail(err, "dataset \"%s\" cannot be read", name);
  else if (H5Tget_class(type) != cls || H5Tget_size(type) != size)
    rc = fimi_fail(err, "dataset \"%s\" has the wrong element type (expected %s of %zu bytes)", name,
                   cls == H5T_FLOAT ? "float" : "integer", size);
  else if (H5Sget_simple_extent_ndims(space) != 1)
    rc = fimi_fail(err, "dataset \"%s\" is not 1-dimensional", name);
  else if (H5Sget_simple_extent_dims(space, dims, NULL) != 1 || dims[0] > DATASET_MAX_ELEMENTS)
    rc = fimi_fail(err, "dataset \"%s\" has an invalid length", name);
  if (rc == 0 && dims[0] > 0) {
    *data = malloc((size_t)dims[0] * size);
    if (!*data) rc = fimi_fail(err, "dataset \"%s\": out of memory for %llu elements", name, (unsigned long long)dims[0]);
    else if (H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, *data) < 0)
      rc = fimi_fail(err, "dataset \"%s\": read failed (file damaged?)", name);
  }
  if (rc == 0) *n = dims[0];
  if (rc) {
    free(*data);
    *data = NULL;
  }
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Dclose(ds);
  return rc;
}

static int check_field(const DatasetField *f, int64_t rows, uint64_t n_offsets, uint64_t n_tokens, uint64_t n_mask,
                       int32_t vocab, FimiError *err) {
  if (n_offsets != (uint64_t)rows + 1)
    return fimi_fail(err, "%s/offsets has %llu entries, expected rows + 1 = %lld", f->name,
                     (unsigned long long)n_offsets, (long long)rows + 1);
  if (n_mask != n_tokens)
    return fimi_fail(err, "%s/loss_mask has %llu entries but %s/tokens has %llu", f->name,
                     (unsigned long long)n_mask, f->name, (unsigned long long)n_tokens);
  if (f->offsets[0] != 0) return fimi_fail(err, "%s/offsets[0] is %lld, not 0", f->name, (long long)f->offsets[0]);
  for (int64_t r = 0; r < rows; r++)
    if (f->offsets[r + 1] < f->offsets[r])
      return fimi_fail(err, "%s/offsets: row %lld: offsets decrease (%lld then %lld)", f->name, (long long)r,
                       (long long)f->offsets[r], (long long)f->offsets[r + 1]);
  if ((uint64_t)f->offsets[rows] != n_tokens)
    return fimi_fail(err, "%s/offsets[%lld] = %lld, but %s/tokens has %llu entries", f->name, (long long)rows,
                     (long long)f->offsets[rows], f->name, (unsigned long long)n_tokens);
  int64_t row = 0;
  for (uint64_t i = 0; i < n_tokens; i++) {
    while ((uint64_t)f->offsets[row + 1] <= i) row++;
    if (f->tokens[i] < 0 || f->tokens[i] >= vocab)
      return fimi_fail(err, "%s/tokens[%llu] (row %lld): id %d is outside the vocabulary [0, %d)", f->name,
                       (unsigned long long)i, (long long)row, f->tokens[i], vocab);
    if (f->loss_mask[i] > 1)
      return fimi_fail(err, "%s/loss_mask[%llu] (row %lld): %u is not 0 or 1", f->name, (unsigned long long)i,
                       (long long)row, f->loss_mask[i]);
  }
  return 0;
}

static int read_field(hid_t file, Dataset *ds, int i, const char *name, FimiError *err) {
  DatasetField *f = &ds->fields[i];
  snprintf(f->name, sizeof f->name, "%s", name);
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return fimi_fail(err, "group \"%s\" is missing", name);
  hid_t g = H5Gopen2(file, name, H5P_DEFAULT);
  if (g < 0) return fimi_fail(err, "\"%s\" is not a group", name);
  uint64_t n_off, n_tok, n_mask;
  int rc = read_array(g, "offsets", H5T_INTEGER, 8, H5T_NATIVE_INT64, (void **)&f->offsets, &n_off, err) ||
                   read_array(g, "tokens", H5T_INTEGER, 4, H5T_NATIVE_INT32, (void **)&f->tokens, &n_tok, err) ||
                   read_array(g, "loss_mask", H5T_INTEGER, 1, H5T_NATIVE_UINT8, (void **)&f->loss_mask, &n_mask, err)
               ? -1
               : 0;
  H5Gclose(g);
  if (rc == 0) rc = check_field(f, ds->rows, n_off, n_tok, n_mask, ds->vocab_size, err);
  return rc ? fimi_fail_wrap(err, "%s", name) : 0;
}

typedef struct RefScan {
  char names[DATASET_MAX_REF][64];
  int count, too_many;
} RefScan;

static herr_t scan_ref(hid_t loc, const char *name, const H5L_info_t *info, void *data) {
  (void)loc;
  (void)info;
  RefScan *s = data;
  if (strncmp(name, "ref_logp_", 9) != 0) return 0;
  if (s->count == DATASET_MAX_REF || strlen(name) >= sizeof s->names[0]) {
    s->too_many = 1;
    return 0;
  }
  snprintf(s->names[s->count++], sizeof s->names[0], "%s", name);
  return 0;
}

static int read_refs(hid_t file, Dataset *ds, FimiError *err) {
  RefScan scan = {0};
  hsize_t idx = 0;
  if (H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, &idx, scan_ref, &scan) < 0)
    return fimi_fail(err, "cannot list the file's datasets");
  if (scan.too_many) return fimi_fail(err, "more than %d ref_logp_* datasets, or a name too long", DATASET_MAX_REF);
  for (int i = 0; i < scan.count; i++) {
    uint64_t n;
    snprintf(ds->ref_names[i], sizeof ds->ref_names[i], "%s", scan.names[i]);
    if (read_array(file, scan.names[i], H5T_FLOAT, 4, H5T_NATIVE_FLOAT, (void **)&ds->ref[i], &n, err)) return -1;
    ds->num_ref = i + 1;
    if (n != (uint64_t)ds->rows)
      return fimi_fail(err, "%s has %llu values for %lld rows", scan.names[i], (unsigned long long)n,
                       (long long)ds->rows);
    for (uint64_t r = 0; r < n; r++)
      if (!isfinite(ds->ref[i][r])) return fimi_fail(err, "%s: row %llu is not finite", scan.names[i], (unsigned long long)r);
  }
  return 0;
}

static int read_header(hid_t file, Dataset *ds, int32_t expect_vocab, FimiError *err) {
  int64_t version, vocab;
  char kind[16];
  if (dataset_internal_read_int_attr(file, "format_version", &version, err)) return -1;
  if (version != DATASET_FORMAT_VERSION)
    return fimi_fail(err, "format_version %lld is not %d", (long long)version, DATASET_FORMAT_VERSION);
  if (read_string_attr(file, "kind", 1, kind, sizeof kind, err) || dataset_kind_parse(kind, &ds->kind, err)) return -1;
  if (dataset_internal_read_int_attr(file, "vocab_size", &vocab, err) ||
      dataset_internal_read_int_attr(file, "rows", &ds->rows, err))
    return -1;
  if (vocab <= 0 || vocab > INT32_MAX) return fimi_fail(err, "vocab_size %lld is out of range", (long long)vocab);
  if (ds->rows < 0 || (uint64_t)ds->rows >= DATASET_MAX_ELEMENTS)
    return fimi_fail(err, "rows %lld is out of range", (long long)ds->rows);
  ds->vocab_size = (int32_t)vocab;
  if (expect_vocab > 0 && ds->vocab_size != expect_vocab)
    return fimi_fail(err, "vocab_size %d differs from the tokenizer's %d", ds->vocab_size, expect_vocab);
  // Statistics: informative, optional.
  int64_t *stats[] = {&ds->max_length, &ds->rows_in, &ds->truncated, &ds->dropped, &ds->skipped};
  const char *names[] = {"max_length", "rows_in", "truncated", "dropped", "skipped"};
  for (int i = 0; i < 5; i++)
    if (H5Aexists(file, names[i]) > 0 && dataset_internal_read_int_attr(file, names[i], stats[i], err)) return -1;
  return read_string_attr(file, "overlong", 0, ds->overlong, sizeof ds->overlong, err) ||
                 read_string_attr(file, "source", 0, ds->source, sizeof ds->source, err) ||
                 read_string_attr(file, "tokenizer_fnv1a64", 0, ds->tokenizer_hash, sizeof ds->tokenizer_hash, err)
             ? -1
             : 0;
}

int dataset_open(const char *path, int32_t expect_vocab, Dataset *ds, FimiError *err) {
  memset(ds, 0, sizeof *ds);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  FILE *probe = fopen(path, "rb");
  if (!probe) return fimi_fail(err, "%s: cannot open", path);
  fclose(probe);
  if (H5Fis_hdf5(path) <= 0) return fimi_fail(err, "%s: not an HDF5 file", path);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return fimi_fail(err, "%s: HDF5 cannot open the file (damaged?)", path);
  int rc = read_header(file, ds, expect_vocab, err);
  ds->num_fields = rc == 0 ? dataset_internal_num_fields(ds->kind) : 0;
  for (int i = 0; i < ds->num_fields && rc == 0; i++)
    rc = read_field(file, ds, i, dataset_internal_field_name(ds->kind, i), err);
  if (rc == 0) rc = read_refs(file, ds, err);
  if (rc == 0 && ds->kind == DATASET_DPO)  // a pair's responses follow the prompt: every prompt starts non-empty
    for (int64_t r = 0; r < ds->rows; r++)
      if (ds->fields[0].offsets[r + 1] == ds->fields[0].offsets[r]) {
        rc = fimi_fail(err, "prompt: row %lld is empty", (long long)r);
        break;
      }
  H5Fclose(file);
  if (rc) {
    dataset_close(ds);
    return fimi_fail_wrap(err, "%s", path);
  }
  return 0;
}

void dataset_close(Dataset *ds) {
  for (int i = 0; i < DATASET_MAX_FIELDS; i++) {
    free(ds->fields[i].offsets);
    free(ds->fields[i].tokens);
    free(ds->fields[i].loss_mask);
  }
  for (int i = 0; i < DATASET_MAX_REF; i++) free(ds->ref[i]);
  memset(ds, 0, sizeof *ds);
}

int dataset_field_index(const Dataset *ds, const char *name) {
  for (int i = 0; i < ds->num_fields; i++)
    if (!strcmp(ds->fields[i].name, name)) return i;
  return -1;
}

const float *dataset_ref(const Dataset *ds, const char *name) {
  for (int i = 0; i < ds->num_ref; i++)
    if (!strcmp(ds->ref_names[i], name)) return ds->ref[i];
  return NULL;
}

int dataset_row(const Dataset *ds, int field, int64_t row, const int32_t **ids, const uint8_t **mask, int64_t *len,
                FimiError *err) {
  if (field < 0 || field >= ds->num_fields) return fimi_fail(err, "dataset: no field %d", field);
  if (row < 0 || row >= ds->rows)
    return fimi_fail(err, "dataset: row %lld is outside [0, %lld)", (long long)row, (long long)ds->rows);
  const DatasetField *f = &ds->fields[field];
  int64_t start = f->offsets[row];
  if (ids) *ids = f->tokens ? f->tokens + start : NULL;
  if (mask) *mask = f->loss_mask ? f->loss_mask + start : NULL;
  *len = f->offsets[row + 1] - start;
  return 0;
}

// ---- loader -----------------------------------------------------------------

// Uniform in [0, n) without modulo bias (rejection of the top partial block).
static uint64_t uniform_below(Rng *rng, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = rng_next_u64(rng);
  while (x >= limit);
  return x % n;
}

int dataset_epoch_permutation(uint64_t seed, uint64_t epoch, int shuffle, int64_t rows, int64_t *perm,
                              FimiError *err) {
  if (rows < 0) return fimi_fail(err, "dataset: negative row count");
  for (int64_t i = 0; i < rows; i++) perm[i] = i;
  if (!shuffle) return 0;
  // One stream per (seed, epoch): splitmix64 inside rng_seed decorrelates
  // nearby keys, the odd multiplier keeps (seed, epoch) pairs apart.
  Rng rng;
  rng_seed(&rng, seed ^ ((epoch + 1) * 0x9E3779B97F4A7C15ULL));
  for (int64_t i = rows - 1; i > 0; i--) {  // Fisher-Yates
    int64_t j = (int64_t)uniform_below(&rng, (uint64_t)i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  return 0;
}

int dataset_loader_init(DatasetLoader *l, int64_t rows, uint64_t seed, int rank, int world, int shuffle,
                        FimiError *err) {
  memset(l, 0, sizeof *l);
  if (world < 1 || rank < 0 || rank >= world)
    return fimi_fail(err, "dataset loader: rank %d is outside world size %d", rank, world);
  if (rows < world)
    return fimi_fail(err, "dataset loader: %lld rows cannot feed %d ranks (each needs at least one)", (long long)rows,
                     world);
  if ((uint64_t)rows > SIZE_MAX / sizeof(int64_t)) return fimi_fail(err, "dataset loader: too many rows");
  l->perm = fimi_malloc((size_t)rows * sizeof(int64_t), err);
  if (!l->perm) return -1;
  l->rows = rows;
  l->per_rank = rows / world;
  l->seed = seed;
  l->rank = rank;
  l->world = world;
  l->shuffle = shuffle;
  return 0;
}

void dataset_loader_free(DatasetLoader *l) {
  free(l->perm);
  memset(l, 0, sizeof *l);
}

int dataset_loader_seek(DatasetLoader *l, DatasetCursor cursor, FimiError *err) {
  if (cursor.position > (uint64_t)l->per_rank)
    return fimi_fail(err, "dataset loader: cursor position %llu is beyond the %lld rows per rank and epoch",
                     (unsigned long long)cursor.position, (long long)l->per_rank);
  l->cursor = cursor;
  return 0;
}

int dataset_loader_next(DatasetLoader *l, int64_t batch, int64_t *rows_out, int64_t *count, uint64_t *epoch,
                        FimiError *err) {
  if (batch < 1) return fimi_fail(err, "dataset loader: batch size must be >= 1");
  if (!l->perm) return fimi_fail(err, "dataset loader: not initialized");
  if (l->cursor.position >= (uint64_t)l->per_rank) {  // the epoch is done: start the next
    l->cursor.epoch++;
    l->cursor.position = 0;
  }
  if (!l->perm_valid || l->perm_epoch != l->cursor.epoch) {
    if (dataset_epoch_permutation(l->seed, l->cursor.epoch, l->shuffle, l->rows, l->perm, err)) return -1;
    l->perm_epoch = l->cursor.epoch;
    l->perm_valid = 1;
  }
  int64_t left = l->per_rank - (int64_t)l->cursor.position;
  int64_t n = batch < left ? batch : left;
  for (int64_t i = 0; i < n; i++) {
    int64_t k = (int64_t)l->cursor.position + i;
    rows_out[i] = l->perm[k * l->world + l->rank];
  }
  l->cursor.position += (uint64_t)n;
  *count = n;
  if (epoch) *epoch = l->cursor.epoch;
  return 0;
}
