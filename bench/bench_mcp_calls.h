// bench/bench_mcp_calls.h: the JSON-RPC requests the MCP benchmarks send
// (bench_mcp_stdio.c, bench_mcp_http.c; header-only, static): verify the
// n-th customer of bank image 1 (the one `fimi mcp serve --create` writes),
// read the balance of that customer's first account, and a write
// (update_contact) whose e-mail takes the call's index.
#ifndef FIMI_BENCH_MCP_CALLS_H
#define FIMI_BENCH_MCP_CALLS_H

#include <stdio.h>

#include <sqlite3.h>

#include "env/bank/db.h"

typedef struct McpBenchCalls {
  char verify[512], read[256], write_fmt[256];  // write_fmt: one %d, the call index
} McpBenchCalls;

// Fills *calls for customer n; on failure returns -1 with err set.
static int mcp_bench_calls(McpBenchCalls *calls, int n, FimiError *err) {
  BankImage image;
  BankEpisode *ep = NULL;
  char id[BANK_ID_MAX], dob[11], mobile[16], account[BANK_ID_MAX] = "";
  if (bank_image_build(1, &image, err) != 0) return -1;
  int rc = bank_episode_open(&image, NULL, &ep, err);
  if (rc == 0) rc = bank_episode_customer_credentials(ep, n, id, dob, mobile, err);
  if (rc == 0) {
    sqlite3_stmt *stmt = NULL;
    sqlite3_prepare_v2(ep->db, "SELECT account_id FROM accounts WHERE customer_id = ? ORDER BY 1", -1, &stmt, NULL);
    sqlite3_bind_text(stmt, 1, id, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt) == SQLITE_ROW) snprintf(account, sizeof account, "%s", sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
  }
  if (ep) bank_episode_close(ep);
  bank_image_free(&image);
  if (rc != 0) return -1;
  snprintf(calls->verify, sizeof calls->verify,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"verify_customer\","
           "\"arguments\":{\"customer_id\":\"%s\",\"date_of_birth\":\"%s\",\"registered_mobile\":\"%s\"}}}",
           id, dob, mobile);
  snprintf(calls->read, sizeof calls->read,
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"get_account_balance\","
           "\"arguments\":{\"account_ids\":[\"%s\"]}}}", account);
  snprintf(calls->write_fmt, sizeof calls->write_fmt, "%s",
           "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"update_contact\","
           "\"arguments\":{\"email\":\"bench%d@example.com\"}}}");
  return 0;
}

#endif
