// bench/bench_env_tools.c: speed of Navadhan Bank's database and tools on one
// CPU core. Times the image build (seeding + serialize), the per-episode copy
// (sqlite3_deserialize into a fresh connection, open + close), the first
// query of a copy (schema parse), single tool calls (reads and writes), and a
// short scripted episode like an oracle's: copy, verify, balance, rates,
// create_fd, balance, close. Prints a table (mean microseconds per operation
// and operations per second).
//
// Usage: bench_env_tools [--episodes N] (default 2000)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env/bank/db.h"
#include "env/bank/tools.h"

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void row(const char *what, double seconds, int count) {
  double us = 1e6 * seconds / count;
  printf("| %-44s | %10.1f | %12.0f |\n", what, us, 1e6 / us);
}

static BankEpisode *open_episode(const BankImage *image) {
  FimiError err = {0};
  BankEpisode *ep = NULL;
  if (bank_episode_open(image, NULL, &ep, &err) != 0) {
    fprintf(stderr, "bench_env_tools: %s\n", err.message);
    exit(1);
  }
  return ep;
}

static int run_call(BankEpisode *ep, const char *name, const char *args_json) {
  cJSON *args = cJSON_Parse(args_json);
  ToolResult result;
  int ok = env_tool_call(ep, name, args, &result);
  if (!ok) fprintf(stderr, "bench_env_tools: %s failed: %s\n", name, result.text ? result.text : "?");
  tool_result_free(&result);
  cJSON_Delete(args);
  return ok;
}

// The five calls of the scripted episode (customer 0, as in the paper's
// Figure 4: balance, rates, book an FD, balance again).
static int scripted_calls(BankEpisode *ep, const char *verify, const char *balance, const char *fd) {
  return run_call(ep, "verify_customer", verify) && run_call(ep, "get_account_balance", balance) &&
         run_call(ep, "get_deposit_loan_rates", "{\"product_type\": \"fd\"}") && run_call(ep, "create_fd", fd) &&
         run_call(ep, "get_account_balance", balance);
}

static int scripted_episode(const BankImage *image, const char *verify, const char *balance, const char *fd) {
  BankEpisode *ep = open_episode(image);
  int ok = scripted_calls(ep, verify, balance, fd);
  bank_episode_close(ep);
  return ok;
}

int main(int argc, char **argv) {
  int episodes = 2000;
  if (argc == 3 && strcmp(argv[1], "--episodes") == 0) episodes = atoi(argv[2]);
  if (episodes < 10 || episodes > 10000000) {
    fprintf(stderr, "usage: bench_env_tools [--episodes N]  (N >= 10)\n");
    return 2;
  }
  FimiError err = {0};
  BankImage image;
  int builds = 20;
  double t0 = now_seconds();
  for (int i = 0; i < builds; i++) {
    if (bank_image_build(1, &image, &err) != 0) {
      fprintf(stderr, "bench_env_tools: %s\n", err.message);
      return 1;
    }
    if (i + 1 < builds) bank_image_free(&image);
  }
  double build_s = now_seconds() - t0;

  printf("Navadhan Bank environment, one core; image %lld bytes, %d customers, %d tools\n\n", (long long)image.size,
         image.num_customers, env_tool_count());
  printf("| %-44s | %10s | %12s |\n|---|---:|---:|\n", "operation", "us / op", "ops / s");
  row("image build (seed + serialize)", build_s, builds);

  t0 = now_seconds();
  for (int i = 0; i < episodes; i++) bank_episode_close(open_episode(&image));
  row("episode copy: open + close", now_seconds() - t0, episodes);

  char today[11];
  t0 = now_seconds();
  for (int i = 0; i < episodes; i++) {
    BankEpisode *ep = open_episode(&image);
    bank_episode_today(ep, today, &err);
    bank_episode_close(ep);
  }
  row("episode copy + first query (schema parse)", now_seconds() - t0, episodes);

  BankEpisode *probe = open_episode(&image);
  char id[BANK_ID_MAX], dob[11], mobile[16], account[BANK_ID_MAX] = "";
  bank_episode_customer_credentials(probe, 0, id, dob, mobile, &err);
  sqlite3_stmt *stmt = NULL;
  sqlite3_prepare_v2(probe->db, "SELECT account_id FROM accounts WHERE customer_id = ? AND account_type = 'savings'",
                     -1, &stmt, NULL);
  sqlite3_bind_text(stmt, 1, id, -1, SQLITE_STATIC);
  if (sqlite3_step(stmt) == SQLITE_ROW) snprintf(account, sizeof account, "%s", sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  bank_episode_close(probe);
  char verify[160], balance[96], fd[160];
  snprintf(verify, sizeof verify, "{\"customer_id\": \"%s\", \"date_of_birth\": \"%s\", \"registered_mobile\": \"%s\"}",
           id, dob, mobile);
  snprintf(balance, sizeof balance, "{\"account_ids\": [\"%s\"]}", account);
  snprintf(fd, sizeof fd, "{\"principal_amount\": 1000, \"tenure_months\": 12, \"source_account\": \"%s\"}", account);

  static const struct {
    const char *label, *name;
    int which;  // 0 balance, 1 rates, 2 create_fd, 3 transactions, 4 unknown tool
  } calls[] = {{"tool call: get_account_balance (read)", "get_account_balance", 0},
               {"tool call: get_deposit_loan_rates (read)", "get_deposit_loan_rates", 1},
               {"tool call: get_transactions (read, 10 rows)", "get_transactions", 3},
               {"tool call: create_fd (write)", "create_fd", 2}};
  char transactions[96];
  snprintf(transactions, sizeof transactions, "{\"account_id\": \"%s\"}", account);
  for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
    BankEpisode *ep = open_episode(&image);
    run_call(ep, "verify_customer", verify);
    const char *args = calls[k].which == 0 ? balance
                       : calls[k].which == 1 ? "{\"product_type\": \"fd\"}"
                       : calls[k].which == 2 ? fd
                                             : transactions;
    int n = calls[k].which == 2 ? 200 : episodes;  // 200 FDs of Rs 1,000 fit any seeded balance >= Rs 2 lakh
    t0 = now_seconds();
    for (int i = 0; i < n; i++) run_call(ep, calls[k].name, args);
    row(calls[k].label, now_seconds() - t0, n);
    bank_episode_close(ep);
  }
  t0 = now_seconds();
  int failed = 0;
  for (int i = 0; i < episodes; i++) failed += !scripted_episode(&image, verify, balance, fd);
  double episode_s = now_seconds() - t0;
  row("scripted episode: copy + 5 calls + close", episode_s, episodes);

  BankPool *pool = NULL;
  if (bank_pool_create(&image, NULL, &pool, &err) != 0) return 1;
  t0 = now_seconds();
  for (int i = 0; i < episodes; i++) {
    BankEpisode *ep = NULL;
    if (bank_pool_acquire(pool, &ep, &err) != 0) return 1;
    bank_pool_release(ep);
  }
  row("pooled episode: acquire + release (no calls)", now_seconds() - t0, episodes);
  t0 = now_seconds();
  for (int i = 0; i < episodes; i++) {
    BankEpisode *ep = NULL;
    if (bank_pool_acquire(pool, &ep, &err) != 0) return 1;
    failed += !scripted_calls(ep, verify, balance, fd);
    bank_pool_release(ep);
  }
  row("pooled scripted episode: acquire + 5 calls", now_seconds() - t0, episodes);
  bank_pool_free(pool);
  bank_image_free(&image);
  if (failed) fprintf(stderr, "bench_env_tools: %d scripted episodes failed\n", failed);
  return failed ? 1 : 0;
}
