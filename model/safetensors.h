// model/safetensors.h: the safetensors file format (reader and writer).
// Defines SafetensorsDtype, SafetensorsTensor, SafetensorsFile,
// safetensors_open / _read_f32 / _close, safetensors_write.
// The reader validates as the reference implementation does (8-byte header
// length, header size limit, JSON, dtype sizes, offsets contiguous with no
// gaps or overlaps, file length) and its error names the rule broken.
#ifndef FIMI_MODEL_SAFETENSORS_H
#define FIMI_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define SAFETENSORS_MAX_DIMS 8
#define SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u)  // 100 MB, the reference limit

typedef enum {
  SAFETENSORS_F32,
  SAFETENSORS_BF16,
  SAFETENSORS_F16,
  SAFETENSORS_OTHER  // a valid dtype fimi does not convert (I64, U8, ...)
} SafetensorsDtype;

typedef struct SafetensorsTensor {
  char *name;
  SafetensorsDtype dtype;
  char dtype_name[16]; // as written in the file ("F32", "BF16", "F8_E4M3FNUZ", ...)
  int ndim;
  int64_t shape[SAFETENSORS_MAX_DIMS];
  uint64_t begin, end;  // byte offsets within the data section
} SafetensorsTensor;

typedef struct SafetensorsFile {
  char path[1024];
  unsigned char *data;  // the data section (file contents after the header)
  uint64_t data_size;
  SafetensorsTensor *tensors;
  int num_tensors;
  char *metadata_json;  // the __metadata__ object as JSON text, or NULL
  void *mapping;        // private to the implementation
  size_t mapping_size;
} SafetensorsFile;

// Parses and validates a whole file (in memory: `bytes`, `size`), `what` names it.
int safetensors_parse(SafetensorsFile *file, const unsigned char *bytes, size_t size, const char *what,
                      FimiError *err);
int safetensors_open(SafetensorsFile *file, const char *path, FimiError *err);
void safetensors_close(SafetensorsFile *file);
const SafetensorsTensor *safetensors_find(const SafetensorsFile *file, const char *name);
// Converts a F32/BF16/F16 tensor to float32; count must equal its element count.
int safetensors_read_f32(const SafetensorsFile *file, const SafetensorsTensor *tensor, float *out, size_t count,
                         FimiError *err);

// One tensor to write: float32 data converted to `dtype` (F32 or BF16, round
// to nearest even).
typedef struct SafetensorsWriteTensor {
  const char *name;
  int ndim;
  int64_t shape[SAFETENSORS_MAX_DIMS];
  const float *data;
} SafetensorsWriteTensor;

// Writes tensors (in the given order) with __metadata__ {"format":"pt"} and
// the header padded with spaces to a multiple of 8 bytes; atomic (tmp+rename).
int safetensors_write(const char *path, const SafetensorsWriteTensor *tensors, int count, SafetensorsDtype dtype,
                      FimiError *err);

// float32 <-> bfloat16 with round-to-nearest-even (NaN preserved).
uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t value);
float f16_to_float(uint16_t value);

#endif
