// data/dataset_write.c: JSONL -> HDF5 tokenization (dataset_tokenize_jsonl)
// and the reference log-prob writer (dataset_write_ref_logp). Row formats
// and TRL conventions are specified in docs/datasets.md:
//   SFT: {"messages": [...]} or {"prompt": P, "completion": C}
//   DPO: {"prompt": P, "chosen": C, "rejected": R}, or chosen/rejected as
//        whole conversations whose common message prefix is the prompt
// with P, C, R all strings (plain text) or all message lists (chat format).
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "core/fileio.h"
#include "core/hash.h"
#include "core/json.h"
#include "data/chat.h"
#include "data/dataset.h"
#include "data/dataset_internal.h"
#include "data/h5_create.h"
#include "data/tokenizer.h"

#define DATASET_MAX_LINE ((size_t)256 << 20)
#define TOKENIZER_MAX_BYTES ((size_t)1 << 30)

const char *dataset_kind_name(DatasetKind kind) {
  return kind == DATASET_SFT ? "sft" : kind == DATASET_DPO ? "dpo" : NULL;
}

int dataset_kind_parse(const char *name, DatasetKind *out, FimiError *err) {
  if (name && !strcmp(name, "sft")) *out = DATASET_SFT;
  else if (name && !strcmp(name, "dpo")) *out = DATASET_DPO;
  else return fimi_fail(err, "dataset kind \"%s\" is not sft or dpo", name ? name : "(null)");
  return 0;
}

void dataset_default_options(DatasetTokenizeOptions *opt) {
  memset(opt, 0, sizeof *opt);
  opt->kind = DATASET_SFT;
  opt->overlong = DATASET_OVERLONG_TRUNCATE;
}

// ---- growable per-field buffers -------------------------------------------

typedef struct FieldBuf {
  TokenIds ids;
  uint8_t *mask;
  size_t mask_cap;
  int64_t *offsets;
  size_t num_offsets, offsets_cap;
} FieldBuf;

static int grow(void **data, size_t *cap, size_t need, size_t elem, FimiError *err) {
  if (need <= *cap) return 0;
  size_t cap2 = *cap ? *cap : 256;
  while (cap2 < need) {
    if (cap2 > SIZE_MAX / 2 / elem) return fimi_fail(err, "dataset: buffer size overflow");
    cap2 *= 2;
  }
  void *p = realloc(*data, cap2 * elem);
  if (!p) return fimi_fail(err, "dataset: out of memory (%zu bytes)", cap2 * elem);
  *data = p;
  *cap = cap2;
  return 0;
}

static int field_init(FieldBuf *f, FimiError *err) {
  memset(f, 0, sizeof *f);
  if (grow((void **)&f->offsets, &f->offsets_cap, 1, sizeof(int64_t), err)) return -1;
  f->offsets[0] = 0;
  f->num_offsets = 1;
  return 0;
}

static void field_free(FieldBuf *f) {
  token_ids_free(&f->ids);
  free(f->mask);
  free(f->offsets);
  memset(f, 0, sizeof *f);
}

// Appends one row (ids and mask of n tokens) to the field.
static int field_push_row(FieldBuf *f, const int32_t *ids, const uint8_t *mask, size_t n, FimiError *err) {
  size_t start = f->ids.len;
  if (grow((void **)&f->mask, &f->mask_cap, start + n, 1, err)) return -1;
  if (grow((void **)&f->offsets, &f->offsets_cap, f->num_offsets + 1, sizeof(int64_t), err)) return -1;
  if (token_ids_append(&f->ids, ids, n, err)) return -1;
  memcpy(f->mask + start, mask, n);
  f->offsets[f->num_offsets++] = (int64_t)f->ids.len;
  return 0;
}

// ---- one row: ids and masks of its parts ----------------------------------

// A tokenized row before truncation: the SFT sequence, or a DPO prompt and
// its two responses. For SFT, prompt_len (<= seq.len) is unused.
typedef struct RowParts {
  TokenIds part[DATASET_MAX_FIELDS];
  uint8_t *mask[DATASET_MAX_FIELDS];
  size_t mask_cap[DATASET_MAX_FIELDS];
} RowParts;

static void parts_clear(RowParts *r) {
  for (int i = 0; i < DATASET_MAX_FIELDS; i++) r->part[i].len = 0;
}

static void parts_free(RowParts *r) {
  for (int i = 0; i < DATASET_MAX_FIELDS; i++) {
    token_ids_free(&r->part[i]);
    free(r->mask[i]);
  }
  memset(r, 0, sizeof *r);
}

// Appends ids[0..n) with mask (or a constant mask value when mask is NULL) to part i.
static int parts_append(RowParts *r, int i, const int32_t *ids, const uint8_t *mask, uint8_t value, size_t n,
                        FimiError *err) {
  size_t start = r->part[i].len;
  if (grow((void **)&r->mask[i], &r->mask_cap[i], start + n, 1, err)) return -1;
  if (token_ids_append(&r->part[i], ids, n, err)) return -1;
  if (mask) memcpy(r->mask[i] + start, mask, n);
  else memset(r->mask[i] + start, value, n);
  return 0;
}

typedef struct Tokenize {
  const Tokenizer *tok;
  ChatBuilder chat;
  int32_t bos, eos;
  DatasetKind kind;
} Tokenize;

// Plain-text (TRL "standard") form: prompt = <bos> + text (no second <bos>
// when the text already starts with one), response = text + <eos>. Text is
// encoded as `tokenizers` does by default (special-token text matches).
static int encode_plain(Tokenize *t, const char *text, int is_prompt, TokenIds *out, FimiError *err) {
  out->len = 0;
  if (is_prompt && token_ids_push(out, t->bos, err)) return -1;
  size_t before = out->len;
  if (tokenizer_encode(t->tok, text, strlen(text), 0, out, err)) return -1;
  if (is_prompt && out->len > before && out->data[before] == t->bos) {
    memmove(out->data + before, out->data + before + 1, (out->len - before - 1) * sizeof(int32_t));
    out->len--;
  }
  if (!is_prompt && token_ids_push(out, t->eos, err)) return -1;
  return 0;
}

// Renders prompt messages + response messages as one conversation and
// splits it where the response's first model turn starts its content, so
// the prompt ends with the generation prompt <start_of_turn>model\n exactly
// as TRL's add_generation_prompt=True. Prompt ids get mask 0, response ids
// keep the chat mask (1 on model content and its <end_of_turn>).
static int render_pair(Tokenize *t, const cJSON *prompt, const cJSON *response, const cJSON *tools,
                       const char *what, const char *resp_name, size_t *prompt_len, FimiError *err) {
  if (!cJSON_IsArray(response) || cJSON_GetArraySize(response) == 0)
    return fimi_fail(err, "%s: \"%s\": expected a non-empty list of messages", what, resp_name);
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(response->child, "role");
  if (!cJSON_IsString(role) || (strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "model")))
    return fimi_fail(err, "%s: \"%s\"[0].role: a response must start with an assistant message", what, resp_name);
  cJSON *all = cJSON_CreateArray();
  if (!all) return fimi_fail(err, "dataset: out of memory");
  const cJSON *lists[2] = {prompt, response};
  for (int l = 0; l < 2; l++)
    for (const cJSON *m = lists[l]->child; m; m = m->next) {
      cJSON *copy = cJSON_Duplicate(m, 1);
      if (!copy || !cJSON_AddItemToArray(all, copy)) {
        cJSON_Delete(copy);
        cJSON_Delete(all);
        return fimi_fail(err, "dataset: out of memory");
      }
    }
  // The prompt's length: render it alone (the chat format is incremental, so
  // it is a prefix of the whole conversation; checked below).
  char what_part[700];
  snprintf(what_part, sizeof what_part, "%s: \"prompt\"", what);
  chat_reset(&t->chat);
  if (chat_render_messages(&t->chat, prompt, tools, what_part, err)) {
    cJSON_Delete(all);
    return -1;
  }
  size_t plen = t->chat.ids.len;
  TokenIds prefix = {0};
  if (token_ids_append(&prefix, t->chat.ids.data, plen, err)) {
    cJSON_Delete(all);
    return -1;
  }
  snprintf(what_part, sizeof what_part, "%s: \"prompt\"+\"%s\"", what, resp_name);
  chat_reset(&t->chat);
  int rc = chat_render_messages(&t->chat, all, tools, what_part, err);
  cJSON_Delete(all);
  if (rc) {
    token_ids_free(&prefix);
    return -1;
  }
  size_t header = 1 + t->chat.header[CHAT_MODEL].len;
  int same = t->chat.ids.len >= plen + header && !memcmp(prefix.data, t->chat.ids.data, plen * sizeof(int32_t));
  token_ids_free(&prefix);
  if (!same || t->chat.ids.data[plen] != t->chat.specials.start_of_turn)
    return fimi_fail(err, "%s: the prompt's ids are not a prefix of the conversation's (chat format bug)", what);
  *prompt_len = plen + header;
  return 0;
}

// The prompt messages of a DPO row without "prompt": the longest common
// message prefix of chosen and rejected (TRL's maybe_extract_prompt).
static cJSON *extract_prompt(const cJSON *chosen, const cJSON *rejected, const cJSON **chosen_rest,
                             const cJSON **rejected_rest) {
  const cJSON *c = chosen->child, *r = rejected->child;
  cJSON *prompt = cJSON_CreateArray();
  if (!prompt) return NULL;
  while (c && r && cJSON_Compare(c, r, 1)) {
    cJSON_AddItemToArray(prompt, cJSON_Duplicate(c, 1));
    c = c->next;
    r = r->next;
  }
  *chosen_rest = c;
  *rejected_rest = r;
  return prompt;
}

// An array holding the items from `first` to the end (duplicated).
static cJSON *array_tail(const cJSON *first) {
  cJSON *a = cJSON_CreateArray();
  for (const cJSON *m = first; a && m; m = m->next) cJSON_AddItemToArray(a, cJSON_Duplicate(m, 1));
  return a;
}

static int sft_row(Tokenize *t, const cJSON *row, const char *what, RowParts *out, FimiError *err) {
  const cJSON *messages = cJSON_GetObjectItemCaseSensitive(row, "messages");
  const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(row, "prompt");
  const cJSON *completion = cJSON_GetObjectItemCaseSensitive(row, "completion");
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(row, "tools");
  if (messages && (prompt || completion))
    return fimi_fail(err, "%s: a row has either \"messages\" or \"prompt\"/\"completion\", not both", what);
  if (messages) {
    chat_reset(&t->chat);
    if (chat_render_messages(&t->chat, messages, tools, what, err)) return -1;
    return parts_append(out, 0, t->chat.ids.data, t->chat.mask, 0, t->chat.ids.len, err);
  }
  if (!prompt || !completion)
    return fimi_fail(err, "%s: an SFT row needs \"messages\", or \"prompt\" and \"completion\"%s", what,
                     cJSON_GetObjectItemCaseSensitive(row, "chosen") ? " (this looks like a DPO row: --kind dpo)" : "");
  if (cJSON_IsString(prompt) && cJSON_IsString(completion)) {
    TokenIds ids = {0};
    int rc = encode_plain(t, prompt->valuestring, 1, &ids, err) ||
             parts_append(out, 0, ids.data, NULL, 0, ids.len, err) ||
             encode_plain(t, completion->valuestring, 0, &ids, err) ||
             parts_append(out, 0, ids.data, NULL, 1, ids.len, err);
    token_ids_free(&ids);
    if (rc) return fimi_fail_wrap(err, "%s: \"prompt\"/\"completion\"", what);
    return 0;
  }
  if (!cJSON_IsArray(prompt) || !cJSON_IsArray(completion))
    return fimi_fail(err, "%s: \"prompt\" and \"completion\" must both be strings or both lists of messages", what);
  size_t plen;
  if (render_pair(t, prompt, completion, tools, what, "completion", &plen, err)) return -1;
  if (parts_append(out, 0, t->chat.ids.data, NULL, 0, plen, err)) return -1;
  return parts_append(out, 0, t->chat.ids.data + plen, t->chat.mask + plen, 0, t->chat.ids.len - plen, err);
}

// One DPO response rendered after the prompt; the prompt part must equal
// what is already in out->part[0] (both responses share the prompt ids).
static int dpo_response(Tokenize *t, const cJSON *prompt, const cJSON *resp, const cJSON *tools, const char *what,
                        const char *name, int part, RowParts *out, FimiError *err) {
  size_t plen;
  if (render_pair(t, prompt, resp, tools, what, name, &plen, err)) return -1;
  if (part == 1) {
    if (parts_append(out, 0, t->chat.ids.data, NULL, 0, plen, err)) return -1;
  } else if (plen != out->part[0].len || memcmp(out->part[0].data, t->chat.ids.data, plen * sizeof(int32_t))) {
    return fimi_fail(err, "%s: chosen and rejected give different prompt ids", what);
  }
  return parts_append(out, part, t->chat.ids.data + plen, t->chat.mask + plen, 0, t->chat.ids.len - plen, err);
}

static int dpo_row(Tokenize *t, const cJSON *row, const char *what, RowParts *out, FimiError *err) {
  const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(row, "prompt");
  const cJSON *chosen = cJSON_GetObjectItemCaseSensitive(row, "chosen");
  const cJSON *rejected = cJSON_GetObjectItemCaseSensitive(row, "rejected");
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(row, "tools");
  if (!chosen) return fimi_fail(err, "%s: a DPO row needs \"chosen\"", what);
  if (!rejected) return fimi_fail(err, "%s: a DPO row needs \"rejected\"", what);
  if (prompt && cJSON_IsString(prompt) && cJSON_IsString(chosen) && cJSON_IsString(rejected)) {
    TokenIds ids = {0};
    int rc = encode_plain(t, prompt->valuestring, 1, &ids, err) ||
             parts_append(out, 0, ids.data, NULL, 0, ids.len, err) ||
             encode_plain(t, chosen->valuestring, 0, &ids, err) ||
             parts_append(out, 1, ids.data, NULL, 1, ids.len, err) ||
             encode_plain(t, rejected->valuestring, 0, &ids, err) ||
             parts_append(out, 2, ids.data, NULL, 1, ids.len, err);
    token_ids_free(&ids);
    return rc ? fimi_fail_wrap(err, "%s", what) : 0;
  }
  if (!cJSON_IsArray(chosen) || !cJSON_IsArray(rejected) || (prompt && !cJSON_IsArray(prompt)))
    return fimi_fail(err, "%s: \"prompt\", \"chosen\" and \"rejected\" must all be strings or all lists of messages",
                     what);
  if (prompt) {
    if (dpo_response(t, prompt, chosen, tools, what, "chosen", 1, out, err)) return -1;
    return dpo_response(t, prompt, rejected, tools, what, "rejected", 2, out, err);
  }
  // Implicit prompt: the common prefix of the two conversations.
  const cJSON *c_rest = NULL, *r_rest = NULL;
  cJSON *p = extract_prompt(chosen, rejected, &c_rest, &r_rest);
  cJSON *c = array_tail(c_rest), *r = array_tail(r_rest);
  int rc;
  if (!p || !c || !r) rc = fimi_fail(err, "dataset: out of memory");
  else if (cJSON_GetArraySize(p) == 0)
    rc = fimi_fail(err, "%s: no \"prompt\", and \"chosen\" and \"rejected\" share no leading messages", what);
  else
    rc = dpo_response(t, p, c, tools, what, "chosen", 1, out, err) ||
         dpo_response(t, p, r, tools, what, "rejected", 2, out, err);
  cJSON_Delete(p);
  cJSON_Delete(c);
  cJSON_Delete(r);
  return rc ? -1 : 0;
}

// ---- the JSONL pass ---------------------------------------------------------

typedef struct Writer {
  const DatasetTokenizeOptions *opt;
  int num_fields;
  FieldBuf field[DATASET_MAX_FIELDS];
  DatasetTokenizeStats *stats;
} Writer;

static int64_t count_ones(const uint8_t *m, size_t n) {
  int64_t c = 0;
  for (size_t i = 0; i < n; i++) c += m[i];
  return c;
}

// Applies max_length and stores the row. SFT: the sequence. DPO: prompt +
// each response must fit; responses are cut to max_length - prompt length,
// and a prompt that alone reaches max_length drops the pair in either mode.
static int store_row(Writer *w, RowParts *r, FimiError *err) {
  int64_t max = w->opt->max_length;
  size_t keep[DATASET_MAX_FIELDS] = {0};
  int cut = 0, drop = 0;
  for (int i = 0; i < w->num_fields; i++) keep[i] = r->part[i].len;
  if (w->opt->kind == DATASET_SFT) {
    if (max > 0 && (int64_t)keep[0] > max) {
      cut = 1;
      keep[0] = (size_t)max;
    }
  } else if (max > 0) {
    size_t p = keep[0];
    for (int i = 1; i < 3; i++)
      if ((int64_t)(p + keep[i]) > max) {
        cut = 1;
        if ((int64_t)p >= max) drop = 1;
        else keep[i] = (size_t)(max - (int64_t)p);
      }
  }
  if (cut && w->opt->overlong == DATASET_OVERLONG_DROP) drop = 1;
  if (drop) {
    w->stats->dropped++;
    return 0;
  }
  if (cut) w->stats->truncated++;
  int64_t longest = 0;
  for (int i = 0; i < w->num_fields; i++) {
    if (field_push_row(&w->field[i], r->part[i].data, r->mask[i], keep[i], err)) return -1;
    w->stats->tokens += (int64_t)keep[i];
    w->stats->loss_tokens += count_ones(r->mask[i], keep[i]);
    if (i > 0 && (int64_t)keep[i] > longest) longest = (int64_t)keep[i];
  }
  longest = w->opt->kind == DATASET_SFT ? (int64_t)keep[0] : (int64_t)keep[0] + longest;
  if (longest > w->stats->max_row_tokens) w->stats->max_row_tokens = longest;
  w->stats->rows++;
  return 0;
}

static int is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i])) return 0;
  return 1;
}

static int tokenize_line(Tokenize *t, Writer *w, RowParts *parts, const char *line, size_t n, const char *what,
                         FimiError *err) {
  cJSON *row = json_parse_text(line, n, what, err);
  if (!row) return -1;
  int rc;
  parts_clear(parts);
  if (!cJSON_IsObject(row)) rc = fimi_fail(err, "%s: expected a JSON object", what);
  else if (t->kind == DATASET_SFT) rc = sft_row(t, row, what, parts, err);
  else rc = dpo_row(t, row, what, parts, err);
  cJSON_Delete(row);
  if (rc) return -1;
  if (w->opt->loss_all && parts->part[0].len > 1) memset(parts->mask[0] + 1, 1, parts->part[0].len - 1);
  return store_row(w, parts, err) ? 1 : 0;  // 1: a fatal (not a row) error
}

static int read_rows(const char *input_path, Tokenize *t, Writer *w, FimiError *err) {
  FILE *f = fopen(input_path, "rb");
  if (!f) return fimi_fail(err, "%s: cannot open: %s", input_path, strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  RowParts parts = {0};
  int rc = 0;
  char what[600];
  while ((n = getline(&line, &cap, f)) >= 0) {
    w->stats->lines++;
    if ((size_t)n > DATASET_MAX_LINE) {
      rc = fimi_fail(err, "%s line %lld: longer than %zu bytes", input_path, (long long)w->stats->lines,
                     DATASET_MAX_LINE);
      break;
    }
    if (is_blank(line, (size_t)n)) continue;
    w->stats->rows_in++;
    snprintf(what, sizeof what, "%s line %lld", input_path, (long long)w->stats->lines);
    FimiError row_err = {0};
    int r = tokenize_line(t, w, &parts, line, (size_t)n, what, &row_err);
    if (r == 0) continue;
    if (r < 0 && w->opt->skip_bad) {
      if (w->stats->skipped++ == 0) snprintf(w->stats->first_skip, sizeof w->stats->first_skip, "%s", row_err.message);
      continue;
    }
    *err = row_err;
    rc = -1;
    break;
  }
  if (rc == 0 && ferror(f)) rc = fimi_fail(err, "%s: read error: %s", input_path, strerror(errno));
  free(line);
  parts_free(&parts);
  fclose(f);
  return rc;
}

// ---- HDF5 output --------------------------------------------------------------

static const char *FIELD_NAMES[2][DATASET_MAX_FIELDS] = {{"seq"}, {"prompt", "chosen", "rejected"}};

const char *dataset_internal_field_name(DatasetKind kind, int i) {
  if ((kind != DATASET_SFT && kind != DATASET_DPO) || i < 0 || i >= dataset_internal_num_fields(kind)) return NULL;
  return FIELD_NAMES[kind][i];
}

int dataset_internal_num_fields(DatasetKind kind) { return kind == DATASET_DPO ? 3 : 1; }

int h5_write_array(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *data, uint64_t n,
                   FimiError *err) {
  hsize_t dims[1] = {(hsize_t)n};
  hid_t space = H5Screate_simple(1, dims, NULL);
  if (space < 0) return fimi_fail(err, "HDF5: cannot create a dataspace for \"%s\"", name);
  hid_t ds = h5_create_dataset(loc, name, file_type, space);
  int rc = 0;
  if (ds < 0) rc = fimi_fail(err, "HDF5: cannot create dataset \"%s\"", name);
  else if (n > 0 && H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    rc = fimi_fail(err, "HDF5: cannot write dataset \"%s\"", name);
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  return rc;
}

static int attr_int(hid_t loc, const char *name, int64_t value, FimiError *err) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a < 0 || H5Awrite(a, H5T_NATIVE_INT64, &value) < 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  return rc ? fimi_fail(err, "HDF5: cannot write attribute \"%s\"", name) : 0;
}

// A variable-length UTF-8 string attribute (h5py reads it as str).
static int attr_string(hid_t loc, const char *name, const char *value, FimiError *err) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a < 0 || H5Awrite(a, type, &value) < 0;
  if (a >= 0) H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  return rc ? fimi_fail(err, "HDF5: cannot write attribute \"%s\"", name) : 0;
}

static int write_fields(hid_t file, Writer *w, DatasetKind kind, FimiError *err) {
  for (int i = 0; i < w->num_fields; i++) {
    const char *name = FIELD_NAMES[kind][i];
    FieldBuf *f = &w->field[i];
    hid_t g = h5_create_group(file, name);
    if (g < 0) return fimi_fail(err, "HDF5: cannot create group \"%s\"", name);
    int rc = h5_write_array(g, "tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, f->ids.data, f->ids.len, err) ||
             h5_write_array(g, "offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, f->offsets, f->num_offsets, err) ||
             h5_write_array(g, "loss_mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, f->mask, f->ids.len, err);
    H5Gclose(g);
    if (rc) return fimi_fail_wrap(err, "group \"%s\"", name);
  }
  return 0;
}

static int write_attrs(hid_t file, const Writer *w, int32_t vocab, const char *hash, const char *source,
                       FimiError *err) {
  const DatasetTokenizeStats *s = w->stats;
  return attr_int(file, "format_version", DATASET_FORMAT_VERSION, err) ||
         attr_string(file, "kind", dataset_kind_name(w->opt->kind), err) ||
         attr_int(file, "vocab_size", vocab, err) || attr_string(file, "tokenizer_fnv1a64", hash, err) ||
         attr_string(file, "source", source, err) || attr_int(file, "rows", s->rows, err) ||
         attr_int(file, "rows_in", s->rows_in, err) || attr_int(file, "truncated", s->truncated, err) ||
         attr_int(file, "dropped", s->dropped, err) || attr_int(file, "skipped", s->skipped, err) ||
         attr_int(file, "max_length", w->opt->max_length, err) ||
         attr_string(file, "overlong", w->opt->overlong == DATASET_OVERLONG_DROP ? "drop" : "truncate", err) ||
         attr_string(file, "loss", w->opt->loss_all ? "all" : "model", err)
             ? -1
             : 0;
}

static int write_h5(const char *tmp_path, Writer *w, int32_t vocab, const char *hash, const char *source,
                    FimiError *err) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = h5_create_file(tmp_path);
  if (file < 0) return fimi_fail(err, "%s: HDF5 cannot create the file", tmp_path);
  int rc = write_fields(file, w, w->opt->kind, err) || write_attrs(file, w, vocab, hash, source, err) ? -1 : 0;
  if (H5Fclose(file) < 0 && rc == 0) rc = fimi_fail(err, "%s: HDF5 close failed", tmp_path);
  return rc ? fimi_fail_wrap(err, "%s", tmp_path) : 0;
}

void dataset_internal_fnv1a64_hex(const void *data, size_t n, char out[17]) {
  snprintf(out, 17, "%016llx", (unsigned long long)hash_fnv1a(HASH_FNV1A_BASIS, data, n));
}

static int check_options(const DatasetTokenizeOptions *opt, FimiError *err) {
  if (opt->kind != DATASET_SFT && opt->kind != DATASET_DPO) return fimi_fail(err, "dataset: invalid kind");
  if (opt->max_length < 0) return fimi_fail(err, "dataset: max_length must be >= 0");
  if (opt->loss_all && opt->kind != DATASET_SFT)
    return fimi_fail(err, "dataset: a loss on every token is for SFT rows only (DPO compares responses)");
  if (opt->overlong != DATASET_OVERLONG_TRUNCATE && opt->overlong != DATASET_OVERLONG_DROP)
    return fimi_fail(err, "dataset: invalid overlong mode");
  return 0;
}

static int tokenize_to(const char *input_path, const Tokenizer *tok, const char *hash, const char *tmp_path,
                       const DatasetTokenizeOptions *opt, DatasetTokenizeStats *stats, FimiError *err) {
  Tokenize t = {.tok = tok, .kind = opt->kind};
  const TokenizerSpecials *sp = tokenizer_specials(tok);
  t.bos = sp->bos;
  t.eos = sp->eos;
  if (t.bos < 0 || t.eos < 0) return fimi_fail(err, "dataset: the tokenizer has no <bos> or <eos> token");
  if (chat_init(&t.chat, tok, err)) return -1;
  Writer w = {.opt = opt, .num_fields = dataset_internal_num_fields(opt->kind), .stats = stats};
  int rc = 0;
  for (int i = 0; i < w.num_fields && rc == 0; i++) rc = field_init(&w.field[i], err);
  if (rc == 0) rc = read_rows(input_path, &t, &w, err);
  if (rc == 0) rc = write_h5(tmp_path, &w, tokenizer_vocab_size(tok), hash, input_path, err);
  for (int i = 0; i < w.num_fields; i++) field_free(&w.field[i]);
  chat_free(&t.chat);
  return rc;
}

int dataset_tokenize_jsonl(const char *input_path, const char *tokenizer_path, const char *out_path,
                           const DatasetTokenizeOptions *opt, DatasetTokenizeStats *stats, FimiError *err) {
  DatasetTokenizeStats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (check_options(opt, err)) return -1;
  size_t tok_bytes;
  char *tok_text = file_read_all(tokenizer_path, TOKENIZER_MAX_BYTES, &tok_bytes, err);
  if (!tok_text) return -1;
  char hash[17];
  dataset_internal_fnv1a64_hex(tok_text, tok_bytes, hash);
  Tokenizer *tok = NULL;
  int rc = tokenizer_load_json(tok_text, tok_bytes, tokenizer_path, &tok, err);
  free(tok_text);
  if (rc) return -1;
  char tmp_path[4096];
  if (snprintf(tmp_path, sizeof tmp_path, "%s.tmp", out_path) >= (int)sizeof tmp_path) {
    tokenizer_free(tok);
    return fimi_fail(err, "%s: path too long", out_path);
  }
  rc = tokenize_to(input_path, tok, hash, tmp_path, opt, stats, err);
  tokenizer_free(tok);
  if (rc == 0 && rename(tmp_path, out_path) != 0)
    rc = fimi_fail(err, "%s: cannot rename %s: %s", out_path, tmp_path, strerror(errno));
  if (rc) unlink(tmp_path);
  return rc;
}

// ---- reference log-probs --------------------------------------------------------

static int valid_ref_name(const char *name) {
  size_t n = strlen(name);
  if (n <= 9 || n >= 64 || strncmp(name, "ref_logp_", 9)) return 0;
  for (size_t i = 9; i < n; i++)
    if (!(islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) || name[i] == '_')) return 0;
  return 1;
}

static int copy_file(const char *from, const char *to, FimiError *err) {
  FILE *in = fopen(from, "rb");
  if (!in) return fimi_fail(err, "%s: cannot open: %s", from, strerror(errno));
  FILE *out = fopen(to, "wb");
  if (!out) {
    fclose(in);
    return fimi_fail(err, "%s: cannot create: %s", to, strerror(errno));
  }
  char buf[1 << 16];
  size_t n;
  int rc = 0;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) {
      rc = fimi_fail(err, "%s: write failed: %s", to, strerror(errno));
      break;
    }
  if (rc == 0 && ferror(in)) rc = fimi_fail(err, "%s: read failed", from);
  fclose(in);
  if (fclose(out) != 0 && rc == 0) rc = fimi_fail(err, "%s: write failed: %s", to, strerror(errno));
  return rc;
}

static int add_ref(const char *tmp_path, const char *name, const float *values, int64_t rows, FimiError *err) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = h5_open_file_rw(tmp_path);
  if (file < 0) return fimi_fail(err, "HDF5 cannot open the file for writing");
  int64_t file_rows = -1;
  int rc = 0;
  if (dataset_internal_read_int_attr(file, "rows", &file_rows, err)) rc = -1;
  else if (file_rows != rows)
    rc = fimi_fail(err, "%s: %lld values for a file of %lld rows", name, (long long)rows, (long long)file_rows);
  else if (H5Lexists(file, name, H5P_DEFAULT) > 0 && H5Ldelete(file, name, H5P_DEFAULT) < 0)
    rc = fimi_fail(err, "HDF5 cannot replace \"%s\"", name);
  else rc = h5_write_array(file, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values, (uint64_t)rows, err);
  if (H5Fclose(file) < 0 && rc == 0) rc = fimi_fail(err, "HDF5 close failed");
  return rc;
}

int dataset_write_ref_logp(const char *path, const char *name, const float *values, int64_t rows, FimiError *err) {
  if (!name || !valid_ref_name(name))
    return fimi_fail(err, "%s: \"%s\" is not a reference dataset name (ref_logp_[a-z0-9_]+)", path,
                     name ? name : "(null)");
  if (rows < 0 || (rows > 0 && !values)) return fimi_fail(err, "%s: %s: no values", path, name);
  for (int64_t i = 0; i < rows; i++)
    if (!isfinite(values[i])) return fimi_fail(err, "%s: %s[%lld] is not finite", path, name, (long long)i);
  char tmp_path[4096];
  if (snprintf(tmp_path, sizeof tmp_path, "%s.tmp", path) >= (int)sizeof tmp_path)
    return fimi_fail(err, "%s: path too long", path);
  int rc = copy_file(path, tmp_path, err);
  if (rc == 0) rc = add_ref(tmp_path, name, values, rows, err);
  if (rc == 0 && rename(tmp_path, path) != 0) rc = fimi_fail(err, "cannot rename %s: %s", tmp_path, strerror(errno));
  if (rc) {
    unlink(tmp_path);
    return fimi_fail_wrap(err, "%s", path);
  }
  return 0;
}
