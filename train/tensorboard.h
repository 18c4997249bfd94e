// train/tensorboard.h: TensorBoard event files of a training run
// (docs/tracking.md). Defines TbWriter, tb_writer_open, tb_writer_write_row,
// tb_writer_close and tb_masked_crc32c.
//
// A file is a sequence of TFRecords (little-endian uint64 length, masked
// CRC32C of those 8 bytes, the data, masked CRC32C of the data), each one an
// Event proto (train/tensorboard_event.proto): first the file version
// "brain.Event:2", then a SessionLog START at the first step this file
// logs, then one Event per metrics.jsonl row with every numeric value of the
// row as a simple_value scalar. Every event is flushed when written, so
// TensorBoard shows a run while it trains.
#ifndef FIMI_TRAIN_TENSORBOARD_H
#define FIMI_TRAIN_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

struct cJSON;

#define TB_PATH_MAX 4096
#define TB_TAG_MAX 256  // longer tags are left out of the file

typedef struct TbWriter {
  FILE *f;  // NULL: closed (never opened, closed, or a write failed)
  char path[TB_PATH_MAX];
} TbWriter;

// Creates dir (one level, as dir_create) and a new event file in it named
// events.out.tfevents.SECONDS.HOST.PID, SECONDS later than any event file
// already there, so the files sort in the order they were written (the
// order TensorBoard reads them in). Writes the file version and a
// SessionLog START at first_step (the step the file's first row will have):
// TensorBoard then drops the steps >= first_step that earlier files hold.
// On a failure nothing is left open.
int tb_writer_open(TbWriter *w, const char *dir, int64_t first_step, FimiError *err);

// One Event at the row's "step" holding every number of the row (but the
// step) as a scalar: nested objects and arrays flatten to "a/b" and "a/0",
// booleans are 0 or 1, strings and nulls are left out, a NaN or infinity is
// kept as it is. Flushed. On a failure the file is closed and later calls
// do nothing: -1 with err, once.
int tb_writer_write_row(TbWriter *w, const struct cJSON *row, FimiError *err);

// Closes the file (a no-op when closed); -1 with err when the last bytes
// could not be written.
int tb_writer_close(TbWriter *w, FimiError *err);

// The CRC32C (Castagnoli) of data, rotated right by 15 bits plus 0xa282ead8:
// the checksum TFRecord framing stores.
uint32_t tb_masked_crc32c(const void *data, size_t size);

#endif
