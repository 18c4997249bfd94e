// cmd/cmd_tokenizer.c: `fimi tokenizer encode|decode|info|train`, for
// inspecting a tokenizer.json and for the interop tests (--jsonl reads one
// JSON value per stdin line and writes one JSON value per line).
//   encode --tokenizer PATH (--text STR | --file F | --jsonl) [--add-special] [--no-special-match]
//   decode --tokenizer PATH (--ids 1,2,3 | --jsonl) [--skip-special] [--stream]
//   info PATH
//   train ...  (cmd/cmd_tokenizer_train.c)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/fileio.h"
#include "core/json.h"
#include "data/tokenizer.h"

#define TOKENIZER_CLI_MAX_INPUT ((size_t)1 << 30)

typedef struct TokArgs {
  const char *tokenizer, *text, *file, *ids;
  int jsonl, add_special, no_special_match, skip_special, stream;
} TokArgs;

static void usage(FILE *out) {
  fprintf(out,
          "usage: fimi tokenizer encode --tokenizer PATH (--text STR | --file F | --jsonl) [--add-special] "
          "[--no-special-match]\n"
          "       fimi tokenizer decode --tokenizer PATH (--ids 1,2,3 | --jsonl) [--skip-special] [--stream]\n"
          "       fimi tokenizer info PATH\n"
          "       fimi tokenizer train ...   (fimi tokenizer train --help)\n"
          "--jsonl: one JSON string (encode) or JSON array of ids (decode) per stdin line; one JSON array\n"
          "of ids / JSON string per output line. --stream decodes through the streaming decoder.\n");
}

static int parse_args(int argc, char **argv, TokArgs *a, FimiError *err) {
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--tokenizer")) { if (!(a->tokenizer = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--text")) { if (!(a->text = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--file")) { if (!(a->file = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--ids")) { if (!(a->ids = cli_flag_value(argc, argv, &i, err))) return -1; }
    else if (!strcmp(arg, "--jsonl")) a->jsonl = 1;
    else if (!strcmp(arg, "--add-special")) a->add_special = 1;
    else if (!strcmp(arg, "--no-special-match")) a->no_special_match = 1;
    else if (!strcmp(arg, "--skip-special")) a->skip_special = 1;
    else if (!strcmp(arg, "--stream")) a->stream = 1;
    else return fimi_fail(err, "unknown argument \"%s\"", arg);
  }
  if (!a->tokenizer) return fimi_fail(err, "--tokenizer PATH is required");
  return 0;
}

static void print_ids(const TokenIds *ids, int json) {
  if (json) putchar('[');
  for (size_t i = 0; i < ids->len; i++) printf(i ? (json ? ", %d" : ",%d") : "%d", ids->data[i]);
  puts(json ? "]" : "");
}

// JSON string output (the text may hold NUL and control characters).
static void print_json_string(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c == '\n') fputs("\\n", stdout);
    else if (c < 0x20 || c == 0x7F) printf("\\u%04x", c);
    else putchar(c);
  }
  puts("\"");
}

static int encode_one(const Tokenizer *tok, const TokArgs *a, const char *text, size_t len, int json, FimiError *err) {
  TokenIds ids = {0};
  int flags = (a->add_special ? TOKENIZER_ADD_SPECIAL : 0) | (a->no_special_match ? TOKENIZER_NO_SPECIAL_MATCH : 0);
  if (tokenizer_encode(tok, text, len, flags, &ids, err)) return -1;
  print_ids(&ids, json);
  token_ids_free(&ids);
  return 0;
}

static int decode_one(const Tokenizer *tok, const TokArgs *a, const int32_t *ids, size_t n, int json, FimiError *err) {
  char *text = NULL;
  size_t len = 0;
  if (!a->stream) {
    if (tokenizer_decode(tok, ids, n, a->skip_special, &text, &len, err)) return -1;
  } else {
    TokenStream st;
    token_stream_init(&st, tok, a->skip_special);
    {
      size_t cap = 64, before = 0;
      text = malloc(cap);
      if (!text) return fimi_fail(err, "out of memory");
      for (size_t i = 0; i <= n; i++) {
        char *piece = NULL;
        int rc = i < n ? token_stream_push(&st, ids[i], &piece, err) : token_stream_finish(&st, &piece, err);
        if (rc) { free(text); token_stream_free(&st); return -1; }
        size_t plen = st.emitted - before;  // exact even when the text holds NUL bytes
        before = st.emitted;
        while (len + plen + 1 > cap) cap *= 2;
        char *grown = realloc(text, cap);
        if (!grown) { free(piece); free(text); token_stream_free(&st); return fimi_fail(err, "out of memory"); }
        text = grown;
        memcpy(text + len, piece, plen);
        len += plen;
        free(piece);
      }
      text[len] = 0;
    }
    token_stream_free(&st);
  }
  if (json) print_json_string(text, len);
  else { fwrite(text, 1, len, stdout); putchar('\n'); }
  free(text);
  return 0;
}

static int parse_id_array(const cJSON *arr, const Tokenizer *tok, TokenIds *ids, long line, FimiError *err) {
  if (!cJSON_IsArray(arr)) return fimi_fail(err, "stdin line %ld: expected a JSON array of ids", line);
  for (const cJSON *e = arr->child; e; e = e->next) {
    if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= tokenizer_vocab_size(tok) ||
        e->valuedouble != (double)(int32_t)e->valuedouble)
      return fimi_fail(err, "stdin line %ld: id out of range [0, %d)", line, tokenizer_vocab_size(tok));
    if (token_ids_push(ids, (int32_t)e->valuedouble, err)) return -1;
  }
  return 0;
}

static int run_jsonl(const Tokenizer *tok, const TokArgs *a, int encode, FimiError *err) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  long lineno = 0;
  int rc = 0;
  while (!rc && (n = getline(&line, &cap, stdin)) >= 0) {
    lineno++;
    char what[48];
    snprintf(what, sizeof(what), "stdin line %ld", lineno);
    cJSON *v = json_parse_text(line, (size_t)n, what, err);
    if (!v) { rc = -1; break; }
    if (encode) {
      if (!cJSON_IsString(v)) rc = fimi_fail(err, "%s: expected a JSON string", what);
      else rc = encode_one(tok, a, v->valuestring, strlen(v->valuestring), 1, err);
    } else {
      TokenIds ids = {0};
      rc = parse_id_array(v, tok, &ids, lineno, err) || decode_one(tok, a, ids.data, ids.len, 1, err);
      token_ids_free(&ids);
    }
    cJSON_Delete(v);
    fflush(stdout);
  }
  free(line);
  return rc;
}

static int run_encode(const Tokenizer *tok, const TokArgs *a, FimiError *err) {
  if (a->jsonl) return run_jsonl(tok, a, 1, err);
  if (a->text) return encode_one(tok, a, a->text, strlen(a->text), 0, err);
  if (!a->file) return fimi_fail(err, "one of --text, --file or --jsonl is required");
  size_t size = 0;
  char *text = file_read_all(a->file, TOKENIZER_CLI_MAX_INPUT, &size, err);
  if (!text) return -1;
  int rc = encode_one(tok, a, text, size, 0, err);
  free(text);
  return rc;
}

static int run_decode(const Tokenizer *tok, const TokArgs *a, FimiError *err) {
  if (a->jsonl) return run_jsonl(tok, a, 0, err);
  if (!a->ids) return fimi_fail(err, "--ids or --jsonl is required");
  int *ids = NULL, count = 0;
  if (parse_token_ids(a->ids, tokenizer_vocab_size(tok), &ids, &count, err)) return -1;
  int32_t *ids32 = malloc((size_t)(count ? count : 1) * sizeof(int32_t));
  if (!ids32) { free(ids); return fimi_fail(err, "out of memory"); }
  for (int i = 0; i < count; i++) ids32[i] = ids[i];
  int rc = decode_one(tok, a, ids32, (size_t)count, 0, err);
  free(ids);
  free(ids32);
  return rc;
}

static int run_info(const char *path, FimiError *err) {
  Tokenizer *tok = NULL;
  if (tokenizer_load_file(path, &tok, err)) return -1;
  const TokenizerSpecials *s = tokenizer_specials(tok);
  printf("%s: vocab size %d\n", path, tokenizer_vocab_size(tok));
  printf("specials: bos %d eos %d pad %d unk %d start_of_turn %d end_of_turn %d tool_call %d /tool_call %d\n", s->bos,
         s->eos, s->pad, s->unk, s->start_of_turn, s->end_of_turn, s->tool_call_open, s->tool_call_close);
  tokenizer_free(tok);
  return 0;
}

int cmd_tokenizer(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "train")) return cmd_tokenizer_train(argc - 1, argv + 1);
  if (cli_wants_help(argc, argv, 1)) {
    usage(stdout);
    return 0;
  }
  FimiError err = {0};
  CliOptions common;
  argc = cli_parse_common(&common, argc, argv, &err);  // --log-level and friends
  if (argc < 0) return cli_fail("tokenizer", &err);
  if (!strcmp(sub, "info")) {
    if (argc != 3 || argv[2][0] == '-') {
      fprintf(stderr, "fimi tokenizer info: expected one PATH (see fimi tokenizer info --help)\n");
      return CLI_EXIT_USAGE;
    }
    return run_info(argv[2], &err) ? cli_fail("tokenizer info", &err) : 0;
  }
  int encode = !strcmp(sub, "encode");
  if (!encode && strcmp(sub, "decode")) {
    fprintf(stderr, "fimi tokenizer: unknown subcommand \"%s\" (see fimi tokenizer --help)\n", sub);
    return CLI_EXIT_USAGE;
  }
  TokArgs a = {0};
  if (parse_args(argc, argv, &a, &err)) {
    fprintf(stderr, "fimi tokenizer %s: %s (see fimi tokenizer %s --help)\n", sub, err.message, sub);
    return CLI_EXIT_USAGE;
  }
  Tokenizer *tok = NULL;
  if (tokenizer_load_file(a.tokenizer, &tok, &err)) return cli_fail(encode ? "tokenizer encode" : "tokenizer decode", &err);
  int rc = encode ? run_encode(tok, &a, &err) : run_decode(tok, &a, &err);
  tokenizer_free(tok);
  return rc ? cli_fail(encode ? "tokenizer encode" : "tokenizer decode", &err) : 0;
}
