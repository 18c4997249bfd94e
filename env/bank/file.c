// env/bank/file.c: the bank database as a file on disk (see bank_db.h), for
// servers that keep one bank across many sessions and processes (fimi mcp
// serve). A file is written once from an image, in WAL mode so readers never
// wait for the writer; every process then opens its own connection with a
// busy timeout, and SQLite's locks serialize the writers.
#define _POSIX_C_SOURCE 200809L  // link
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env/bank/db.h"

static int file_fail(sqlite3 *db, FimiError *err, const char *path, const char *what) {
  return fimi_fail(err, "%s: %s: %s", path, what, db ? sqlite3_errmsg(db) : "no connection");
}

// Copies the image into a new file at tmp_path (WAL mode, checkpointed), so
// that the file alone (no -wal beside it) holds the whole bank.
static int write_image(const BankImage *image, const char *tmp_path, FimiError *err) {
  BankEpisode *src = NULL;
  if (bank_episode_open(image, NULL, &src, err) != 0) return -1;
  sqlite3 *dst = NULL;
  int rc = -1;
  if (sqlite3_open_v2(tmp_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    file_fail(dst, err, tmp_path, "creating the database file");
    goto done;
  }
  sqlite3_backup *backup = sqlite3_backup_init(dst, "main", src->db, "main");
  if (!backup) {
    file_fail(dst, err, tmp_path, "copying the image");
    goto done;
  }
  int step = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (step != SQLITE_DONE) {
    file_fail(dst, err, tmp_path, "copying the image");
    goto done;
  }
  if (sqlite3_exec(dst, "PRAGMA journal_mode = WAL", NULL, NULL, NULL) != SQLITE_OK) {
    file_fail(dst, err, tmp_path, "switching to WAL mode");
    goto done;
  }
  rc = 0;
done:
  // The last connection to close checkpoints the WAL into the file.
  if (dst && sqlite3_close(dst) != SQLITE_OK && rc == 0) rc = fimi_fail(err, "%s: closing failed", tmp_path);
  bank_episode_close(src);
  return rc;
}

int bank_file_create(const BankImage *image, const char *path, FimiError *err) {
  if (!image || !image->bytes) return fimi_fail(err, "%s: no bank image to write", path);
  if (access(path, F_OK) == 0) return fimi_fail(err, "%s: exists already (open it without --create)", path);
  char tmp_path[4096];
  int n = snprintf(tmp_path, sizeof tmp_path, "%s.tmp-%ld", path, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof tmp_path) return fimi_fail(err, "%s: path too long", path);
  unlink(tmp_path);
  if (write_image(image, tmp_path, err) != 0) {
    unlink(tmp_path);
    return -1;
  }
  // link() fails when path exists: of two processes creating the same file,
  // exactly one wins and the other's copy is discarded.
  int rc = link(tmp_path, path);
  int saved = errno;
  unlink(tmp_path);
  if (rc != 0) return fimi_fail(err, "%s: %s", path, saved == EEXIST ? "exists already" : strerror(saved));
  return 0;
}

// 1 when the connection holds a bank schema (the clock and counters tools read).
static int looks_like_bank(sqlite3 *db) {
  sqlite3_stmt *stmt = NULL;
  const char *sql = "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('clock', 'counters', "
                    "'customers', 'accounts')";
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) return 0;
  int ok = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int(stmt, 0) == 4;
  sqlite3_finalize(stmt);
  return ok;
}

int bank_episode_open_file(const char *path, const KnowledgeBase *kb, int busy_timeout_ms, BankEpisode **out,
                           FimiError *err) {
  *out = NULL;
  BankEpisode *ep = fimi_calloc(1, sizeof *ep, err);
  if (!ep) return -1;
  ep->kb = kb;
  // No SQLITE_OPEN_CREATE: a mistyped path must fail, not start an empty bank.
  if (sqlite3_open_v2(path, &ep->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    file_fail(ep->db, err, path, "opening the bank database");
    bank_episode_close(ep);
    return -1;
  }
  sqlite3_busy_timeout(ep->db, busy_timeout_ms);
  sqlite3_stmt *stmt = NULL;
  int wal = 0;
  if (sqlite3_prepare_v2(ep->db, "PRAGMA journal_mode = WAL", -1, &stmt, NULL) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char *mode = sqlite3_column_text(stmt, 0);
    wal = mode && strcmp((const char *)mode, "wal") == 0;
  }
  sqlite3_finalize(stmt);
  if (!wal || !looks_like_bank(ep->db)) {
    if (wal) fimi_fail(err, "%s: not a bank database (no clock, counters, customers, accounts tables)", path);
    else file_fail(ep->db, err, path, "not a bank database in WAL mode");
    bank_episode_close(ep);
    return -1;
  }
  *out = ep;
  return 0;
}

void bank_episode_clear_calls(BankEpisode *ep) {
  for (int i = 0; i < ep->num_calls; i++) {
    free(ep->calls[i].name);
    free(ep->calls[i].arguments);
  }
  ep->num_calls = 0;
}
