// tests/test_env_knowledge.c: the bank's knowledge base (env/knowledge.h).
// Defines checks that every embedded document parses and every passage has
// its fields; that retrieval puts the right document in the top 3 for a table
// of realistic customer and agent questions (English and Hinglish); that BM25
// scores equal a brute-force reference computed here without the inverted
// index; determinism and concurrent searches; tokenizer rules; rejection of
// malformed documents loaded from a temp directory (messages must name the
// file and field); and that empty, huge, binary and random queries never crash.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env/knowledge.h"
#include "core/json.h"
#include "test_util.h"

// ------------------------------------------------------------ loading

static int count_words(const char *s) {
  int words = 0, in_word = 0;
  for (; *s; s++) {
    int space = *s == ' ';
    if (!space && !in_word) words++;
    in_word = !space;
  }
  return words;
}

static int is_date(const char *d) {
  if (strlen(d) != 10 || d[4] != '-' || d[7] != '-') return 0;
  for (int i = 0; i < 10; i++)
    if (i != 4 && i != 7 && (d[i] < '0' || d[i] > '9')) return 0;
  return 1;
}

// Re-parses each embedded file with plain cJSON and checks that the loaded
// passages are exactly the documents' passages, in order.
static void test_builtin_documents(void) {
  FimiError err = {0};
  KnowledgeBase *kb = NULL;
  CHECK(kb_load_builtin(&kb, &err) == 0, "kb_load_builtin: %s", err.message);
  if (!kb) return;
  CHECK(kb_embedded_count >= 15 && kb_embedded_count <= 40, "document count %d", kb_embedded_count);
  CHECK(kb_num_documents(kb) == kb_embedded_count, "documents %d vs files %d", kb_num_documents(kb), kb_embedded_count);
  int n = kb_num_passages(kb);
  CHECK(n >= 80 && n <= 150, "passage count %d outside 80..150", n);
  int index = 0, synthetic_docs = 0;
  for (int f = 0; f < kb_embedded_count; f++) {
    cJSON *root = cJSON_ParseWithLength((const char *)kb_embedded_files[f].bytes, kb_embedded_files[f].size);
    CHECK(root != NULL, "%s does not parse with cJSON", kb_embedded_files[f].name);
    if (!root) continue;
    const char *doc_id = cJSON_GetStringValue(cJSON_GetObjectItem(root, "doc_id"));
    const char *source = cJSON_GetStringValue(cJSON_GetObjectItem(root, "source"));
    const cJSON *passages = cJSON_GetObjectItem(root, "passages");
    // The file is named after its doc_id, so a document is easy to find.
    char expected_name[200];
    snprintf(expected_name, sizeof expected_name, "env/kb/%s.json", doc_id ? doc_id : "?");
    CHECK(strcmp(expected_name, kb_embedded_files[f].name) == 0, "%s holds doc_id %s", kb_embedded_files[f].name, doc_id);
    if (source && strstr(source, "Navadhan")) {
      synthetic_docs++;
      CHECK(strstr(source, "(synthetic)") != NULL, "%s: the bank's documents must say synthetic", doc_id);
    }
    for (const cJSON *p = passages ? passages->child : NULL; p; p = p->next, index++) {
      const KbPassage *kp = kb_passage(kb, index);
      CHECK(kp != NULL, "passage %d missing", index);
      if (!kp) break;
      CHECK(doc_id && strcmp(kp->doc_id, doc_id) == 0, "passage %d doc_id", index);
      CHECK(strcmp(kp->text, cJSON_GetStringValue(cJSON_GetObjectItem(p, "text"))) == 0, "passage %d text", index);
      CHECK(strcmp(kp->section, cJSON_GetStringValue(cJSON_GetObjectItem(p, "section"))) == 0, "passage %d section", index);
      CHECK(kp->title[0] && kp->source[0] && is_date(kp->date), "passage %d (%s) title/source/date", index, kp->doc_id);
      int words = count_words(kp->text);
      CHECK(words >= 40 && words <= 150, "%s \"%s\": %d words (want 40..150)", kp->doc_id, kp->section, words);
    }
    cJSON_Delete(root);
  }
  CHECK(index == n, "cJSON counts %d passages, knowledge base %d", index, n);
  CHECK(synthetic_docs >= 6, "only %d Navadhan product documents", synthetic_docs);
  CHECK(kb_passage(kb, -1) == NULL && kb_passage(kb, n) == NULL, "out-of-range passage index");
  kb_free(kb);
}

// ------------------------------------------------------------ retrieval quality

typedef struct Question { const char *query, *doc_id; } Question;

static const Question QUESTIONS[] = {
    {"How often do I need to update my KYC if I am a low risk customer?", "rbi-kyc-master-direction"},
    {"Which documents are accepted as officially valid documents for KYC?", "rbi-kyc-master-direction"},
    {"limits on an account opened with video KYC or OTP e-KYC", "rbi-kyc-master-direction"},
    {"Can I open a small account without any ID documents?", "rbi-kyc-master-direction"},
    {"TDS threshold on fixed deposit interest for senior citizens from FY 2025-26", "it-tds-deposit-interest"},
    {"I don't have a PAN, how much tax will be deducted on my FD interest?", "it-tds-deposit-interest"},
    {"What was the TDS limit on deposit interest in 2023-24?", "it-tds-deposit-interest"},
    {"Who can submit Form 15H?", "it-form-15g-15h"},
    {"Form 15G har saal submit karna padta hai kya?", "it-form-15g-15h"},
    {"What penalty applies if I break my Navadhan fixed deposit early?", "navadhan-deposits"},
    {"FD rate for senior citizens for 2 years", "navadhan-deposits"},
    {"minimum monthly instalment for a recurring deposit", "navadhan-deposits"},
    {"FD tod diya 5 din mein, interest milega?", "navadhan-deposits"},
    {"How much of my deposit is insured if the bank fails?", "dicgc-deposit-insurance"},
    {"RBI LTV cap for a gold loan of 2 lakh under the 2025 directions", "rbi-gold-loan-rules"},
    {"how is 18 carat gold valued for a gold loan", "navadhan-gold-loan"},
    {"gold loan processing fee", "navadhan-gold-loan"},
    {"An unauthorised transaction happened on my card; what is my liability if I report it within 3 days?",
     "rbi-customer-liability-2017"},
    {"OTP share kar diya aur paise kat gaye, loss kaun bharega?", "rbi-customer-liability-2017"},
    {"Is positive pay mandatory for a cheque of 6 lakh?", "navadhan-cheques"},
    {"how long is a cheque valid", "rbi-positive-pay-cheques"},
    {"stop payment charge for a cheque", "navadhan-cheques"},
    {"cheque book charges after the free leaves", "navadhan-cheques"},
    {"pre-debit notification before a recurring card payment", "rbi-emandate-recurring"},
    {"e-mandate limit for insurance premium without OTP", "rbi-emandate-recurring"},
    {"ATM did not dispense cash but my account was debited", "rbi-failed-transactions-tat"},
    {"UPI transfer failed but amount deducted, when will it be reversed?", "rbi-failed-transactions-tat"},
    {"Is there a prepayment charge on my floating rate home loan?", "navadhan-loans"},
    {"personal loan interest rate for credit score 760", "navadhan-loans"},
    {"personal loan foreclosure charges", "navadhan-loans"},
    {"When will the bank return my property papers after I close the loan?", "rbi-retail-loan-rights"},
    {"What is the PMJDY overdraft limit?", "gov-pmjdy"},
    {"PMSBY premium kitna hai?", "gov-pmsby-pmjjby"},
    {"PMJJBY life cover age limit", "gov-pmsby-pmjjby"},
    {"Can an income tax payer join Atal Pension Yojana?", "gov-apy"},
    {"Sukanya Samriddhi account maximum deposit per year", "gov-ssy"},
    {"PPF partial withdrawal rules", "gov-ppf"},
    {"What is the maximum investment in SCSS?", "gov-scss"},
    {"senior citizen savings scheme premature closure penalty", "gov-scss"},
    {"How many days does the insurer take to settle a death claim?", "irdai-insurance-claims"},
    {"free look period for an insurance policy", "irdai-insurance-claims"},
    {"How do I complain to the RBI Ombudsman?", "rbi-integrated-ombudsman"},
    {"bank ne 30 din mein complaint resolve nahi kiya, ombudsman ke paas kaise jaayein", "rbi-integrated-ombudsman"},
    {"IMPS charges for a 50000 transfer", "navadhan-transfers-charges"},
    {"Can I send 1 lakh to a newly added beneficiary right away?", "navadhan-transfers-charges"},
    {"debit card reissue charge", "navadhan-cards"},
    {"minimum balance charge on savings account", "navadhan-savings-account"},
    {"savings account interest rate above 10 lakh", "navadhan-savings-account"},
    {"RTGS minimum amount", "rbi-payment-systems"},
};

static void test_retrieval_quality(const KnowledgeBase *kb) {
  int num = (int)(sizeof QUESTIONS / sizeof QUESTIONS[0]), hits_at_1 = 0, hits_at_3 = 0;
  CHECK(num >= 30, "only %d questions", num);
  for (int q = 0; q < num; q++) {
    FimiError err = {0};
    int idx[3];
    double scores[3];
    int found = kb_search(kb, QUESTIONS[q].query, 3, idx, scores, &err);
    int rank = -1;
    for (int i = 0; i < found && rank < 0; i++)
      if (strcmp(kb_passage(kb, idx[i])->doc_id, QUESTIONS[q].doc_id) == 0) rank = i;
    hits_at_1 += rank == 0;
    hits_at_3 += rank >= 0;
    CHECK(rank >= 0, "\"%s\": want %s in top 3, got %s, %s, %s", QUESTIONS[q].query, QUESTIONS[q].doc_id,
          found > 0 ? kb_passage(kb, idx[0])->doc_id : "-", found > 1 ? kb_passage(kb, idx[1])->doc_id : "-",
          found > 2 ? kb_passage(kb, idx[2])->doc_id : "-");
  }
  printf("retrieval: %d questions, top-1 %d, top-3 %d\n", num, hits_at_1, hits_at_3);
}

// ------------------------------------------------------------ BM25 reference

// Brute force: count terms per passage from scratch and apply the BM25
// formula directly, to check the inverted index and precomputed weights.
typedef struct TokenList { char tokens[4096][KB_MAX_TOKEN_BYTES + 1]; int count; } TokenList;

static void push_token(const char *t, size_t n, void *ctx) {
  TokenList *list = ctx;
  if (list->count == 4096) return;
  memcpy(list->tokens[list->count], t, n);
  list->tokens[list->count++][n] = '\0';
}

static void tokenize_passage(const KbPassage *p, TokenList *out) {
  out->count = 0;
  kb_tokenize(p->title, strlen(p->title), push_token, out);
  kb_tokenize(p->section, strlen(p->section), push_token, out);
  kb_tokenize(p->text, strlen(p->text), push_token, out);
}

static void reference_scores(const KnowledgeBase *kb, const char *query, double *scores) {
  int n = kb_num_passages(kb);
  static TokenList passage, q;
  q.count = 0;
  kb_tokenize(query, strlen(query), push_token, &q);
  double total = 0;
  int *lengths = calloc((size_t)n, sizeof *lengths);
  for (int p = 0; p < n; p++) {
    tokenize_passage(kb_passage(kb, p), &passage);
    lengths[p] = passage.count;
    total += passage.count;
  }
  for (int p = 0; p < n; p++) scores[p] = 0;
  for (int i = 0; i < q.count; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= strcmp(q.tokens[i], q.tokens[j]) == 0;
    if (seen) continue;
    int df = 0;
    int *tf = calloc((size_t)n, sizeof *tf);
    for (int p = 0; p < n; p++) {
      tokenize_passage(kb_passage(kb, p), &passage);
      for (int t = 0; t < passage.count; t++) tf[p] += strcmp(passage.tokens[t], q.tokens[i]) == 0;
      df += tf[p] > 0;
    }
    double idf = log(1.0 + (n - df + 0.5) / (df + 0.5));
    for (int p = 0; p < n; p++)
      if (tf[p] > 0)
        scores[p] += idf * tf[p] * 2.2 / (tf[p] + 1.2 * (0.25 + 0.75 * lengths[p] / (total / n)));
    free(tf);
  }
  free(lengths);
}

static void test_bm25_reference(const KnowledgeBase *kb) {
  const char *queries[] = {"premature closure of a fixed deposit penalty", "gold loan LTV 75% valuation 22 carat",
                           "Form 15G 15H PAN TDS deposits", "cheque cheque cheque positive pay"};
  int n = kb_num_passages(kb);
  double *ref = malloc((size_t)n * sizeof *ref);
  int *idx = malloc((size_t)n * sizeof *idx);
  double *got = malloc((size_t)n * sizeof *got);
  for (int q = 0; q < 4; q++) {
    reference_scores(kb, queries[q], ref);
    FimiError err = {0};
    int found = kb_search(kb, queries[q], n, idx, got, &err);
    int positive = 0;
    for (int p = 0; p < n; p++) positive += ref[p] > 0;
    CHECK(found == positive, "\"%s\": %d results, reference has %d passages with a positive score", queries[q], found,
          positive);
    for (int i = 0; i < found; i++) {
      CHECK(fabs(got[i] - ref[idx[i]]) <= 1e-9 * fabs(ref[idx[i]]), "\"%s\": passage %d score %.12g vs %.12g",
            queries[q], idx[i], got[i], ref[idx[i]]);
      if (i > 0)
        CHECK(got[i - 1] > got[i] || (got[i - 1] == got[i] && idx[i - 1] < idx[i]), "\"%s\": order at %d", queries[q], i);
    }
  }
  free(ref);
  free(idx);
  free(got);
}

// ------------------------------------------------------------ determinism, threads

typedef struct ThreadJob { const KnowledgeBase *kb; int results[50][5]; int failures; } ThreadJob;

static void *search_all(void *arg) {
  ThreadJob *job = arg;
  int num = (int)(sizeof QUESTIONS / sizeof QUESTIONS[0]);
  for (int round = 0; round < 20; round++)
    for (int q = 0; q < num && q < 50; q++) {
      int idx[5] = {-1, -1, -1, -1, -1};
      if (kb_search(job->kb, QUESTIONS[q].query, 5, idx, NULL, NULL) < 0) job->failures++;
      if (round == 0) memcpy(job->results[q], idx, sizeof idx);
      else if (memcmp(job->results[q], idx, sizeof idx) != 0) job->failures++;
    }
  return NULL;
}

static void test_determinism(const KnowledgeBase *shared) {
  FimiError err = {0};
  KnowledgeBase *a = NULL, *b = NULL;
  CHECK(kb_load_builtin(&a, &err) == 0 && kb_load_builtin(&b, &err) == 0, "load: %s", err.message);
  if (!a || !b) return;
  for (int q = 0; q < (int)(sizeof QUESTIONS / sizeof QUESTIONS[0]); q++) {
    int ia[10], ib[10], ic[10];
    double sa[10], sb[10], sc[10];
    int na = kb_search(a, QUESTIONS[q].query, 10, ia, sa, NULL), nb = kb_search(b, QUESTIONS[q].query, 10, ib, sb, NULL);
    int nc = kb_search(shared, QUESTIONS[q].query, 10, ic, sc, NULL);
    CHECK(na == nb && na == nc && memcmp(ia, ib, sizeof(int) * (size_t)na) == 0 &&
              memcmp(ia, ic, sizeof(int) * (size_t)na) == 0 && memcmp(sa, sb, sizeof(double) * (size_t)na) == 0,
          "\"%s\": results differ between loads", QUESTIONS[q].query);
  }
  // Concurrent searches on one shared knowledge base agree with each other.
  ThreadJob jobs[4];
  pthread_t threads[4];
  for (int t = 0; t < 4; t++) {
    jobs[t] = (ThreadJob){.kb = shared};
    pthread_create(&threads[t], NULL, search_all, &jobs[t]);
  }
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  for (int t = 0; t < 4; t++) {
    CHECK(jobs[t].failures == 0, "thread %d: %d inconsistent searches", t, jobs[t].failures);
    CHECK(memcmp(jobs[t].results, jobs[0].results, sizeof jobs[0].results) == 0, "thread %d differs", t);
  }
  kb_free(a);
  kb_free(b);
}

// ------------------------------------------------------------ tokenizer

static void join_token(const char *t, size_t n, void *ctx) {
  char *out = ctx;
  size_t used = strlen(out);
  if (used + n + 2 >= 512) return;
  if (used) out[used++] = '|';
  memcpy(out + used, t, n);
  out[used + n] = '\0';
}

static void check_tokens(const char *text, const char *expected) {
  char out[512] = "";
  kb_tokenize(text, strlen(text), join_token, out);
  CHECK(strcmp(out, expected) == 0, "tokenize \"%s\": got \"%s\" want \"%s\"", text, out, expected);
}

static void test_tokenizer(void) {
  check_tokens("What is the TDS on Form 15G deposits?", "tds|form|15g|deposit");
  check_tokens("₹10,00,000 and 1,000,000 and 3.50% vs 3.5 and 7.00", "1000000|1000000|3.5|vs|3.5|7");
  check_tokens("Policies, charges, branches, addresses, status, bonus, KYC", "policy|charge|branch|address|status|bonus|kyc");
  check_tokens("re-KYC (video-KYC) — 24x7; end.", "re|kyc|video|kyc|24x7|end");
  check_tokens("PMSBY premium kitna hai?", "pmsby|premium|kitna");
  check_tokens("खाता बंद करना है।", "खाता|बंद|करना|है");
  check_tokens("\xff\xfe bad \xc3\x28 utf8 \xe0\x80\x80 x", "bad|utf8|x");  // invalid bytes separate words
  char long_word[200];
  memset(long_word, 'a', sizeof long_word - 1);
  long_word[sizeof long_word - 1] = '\0';
  char out[512] = "";
  kb_tokenize(long_word, strlen(long_word), join_token, out);
  CHECK(strlen(out) == KB_MAX_TOKEN_BYTES, "long word cut to %zu bytes", strlen(out));
}

// ------------------------------------------------------------ malformed documents

static char temp_dir[256];

static void write_file(const char *name, const char *content) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", temp_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fputs(content, f);
  fclose(f);
}

static void clear_dir(void) {
  const char *names[] = {"a.json", "b.json", "doc.json", "notes.txt"};
  for (int i = 0; i < 4; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", temp_dir, names[i]);
    remove(path);
  }
}

#define GOOD_PASSAGE "{\"section\": \"Limits\", \"text\": \"The daily limit is fifty.\"}"
#define DOC(id, title, date, passages) \
  "{\"doc_id\": \"" id "\", \"title\": \"" title "\", \"source\": \"Test Bank\", \"date\": \"" date "\", \"passages\": " passages "}"

typedef struct BadCase { const char *content, *expect1, *expect2; } BadCase;

static void test_malformed_documents(void) {
  snprintf(temp_dir, sizeof temp_dir, "/tmp/fimi_kb_test_XXXXXX");
  CHECK(mkdtemp(temp_dir) != NULL, "mkdtemp");
  const BadCase cases[] = {
      {"{\"doc_id\": \"x\", \"title\": ", "doc.json", "invalid JSON"},
      {"[1, 2]", "doc.json", "JSON object"},
      {"", "doc.json", "invalid JSON"},
      {"{\"doc_id\": \"x\", \"source\": \"s\", \"date\": \"2024-01-01\", \"passages\": [" GOOD_PASSAGE "]}", "doc.json",
       "\"title\""},
      {DOC("x", "T", "2024-01-01", "[" GOOD_PASSAGE ", {\"section\": \"S\", \"text\": \"\"}]"), "passages[1]", "\"text\""},
      {DOC("x", "T", "2024-01-01", "[{\"section\": \"S\", \"text\": 42}]"), "passages[0]", "\"text\" must be a string"},
      {DOC("x", "T", "2024-01-01", "[{\"text\": \"no section\"}]"), "passages[0]", "\"section\""},
      {DOC("x", "T", "2024-01-01", "[{\"section\": \"S\", \"text\": \"t\", \"url\": \"u\"}]"), "passages[0]",
       "unknown field \"url\""},
      {DOC("x", "T", "2024-02-30", "[" GOOD_PASSAGE "]"), "doc.json", "\"date\""},
      {DOC("x", "T", "24-01-01", "[" GOOD_PASSAGE "]"), "doc.json", "\"date\""},
      {DOC("Bad_ID", "T", "2024-01-01", "[" GOOD_PASSAGE "]"), "doc.json", "\"doc_id\""},
      {DOC("x", "T", "2024-01-01", "[]"), "doc.json", "\"passages\""},
      {DOC("x", "T", "2024-01-01", "{\"section\": \"S\"}"), "doc.json", "\"passages\""},
      {DOC("x", "T", "2024-01-01", "[" GOOD_PASSAGE ", 7]"), "passages[1]", "object"},
      {DOC("x", "T\\u0001", "2024-01-01", "[" GOOD_PASSAGE "]"), "doc.json", "\"title\" has a control character"},
      {DOC("x", "T", "2024-01-01", "[{\"section\": \"S\", \"text\": \"bad \xc3\x28 bytes\"}]"), "passages[0]",
       "invalid UTF-8"},
      {"{\"doc_id\": \"x\", \"title\": \"T\", \"source\": \"S\", \"date\": \"2024-01-01\", \"passages\": [" GOOD_PASSAGE
       "], \"extra\": 1}",
       "doc.json", "unknown field \"extra\""},
  };
  for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
    clear_dir();
    write_file("doc.json", cases[c].content);
    FimiError err = {0};
    KnowledgeBase *kb = NULL;
    int rc = kb_load_dir(temp_dir, &kb, &err);
    CHECK(rc == -1 && kb == NULL, "case %d: malformed document accepted", c);
    CHECK(strstr(err.message, cases[c].expect1) && strstr(err.message, cases[c].expect2),
          "case %d: message \"%s\" should name %s and %s", c, err.message, cases[c].expect1, cases[c].expect2);
    kb_free(kb);
  }
  // Two documents with the same doc_id.
  clear_dir();
  write_file("a.json", DOC("same", "T", "2024-01-01", "[" GOOD_PASSAGE "]"));
  write_file("b.json", DOC("same", "U", "2024-01-02", "[" GOOD_PASSAGE "]"));
  FimiError err = {0};
  KnowledgeBase *kb = NULL;
  CHECK(kb_load_dir(temp_dir, &kb, &err) == -1 && strstr(err.message, "b.json") && strstr(err.message, "same"),
        "duplicate doc_id: \"%s\"", err.message);
  // A directory without documents, and one that does not exist.
  clear_dir();
  write_file("notes.txt", "not a document");
  CHECK(kb_load_dir(temp_dir, &kb, &err) == -1 && strstr(err.message, "no *.json"), "empty dir: \"%s\"", err.message);
  CHECK(kb_load_dir("/nonexistent/fimi/kb", &kb, &err) == -1 && strstr(err.message, "/nonexistent/fimi/kb"),
        "missing dir: \"%s\"", err.message);
  // A bank's own documents load and are searchable, including Devanagari text.
  clear_dir();
  write_file("a.json", DOC("own-terms", "Own bank terms", "2024-06-30",
                           "[{\"section\": \"Locker\", \"text\": \"Locker rent is 500 a year.\"}, "
                           "{\"section\": \"खाता\", \"text\": \"खाता बंद करने का शुल्क शून्य है।\"}]"));
  write_file("b.json", DOC("other", "Other", "2024-02-29", "[" GOOD_PASSAGE "]"));
  CHECK(kb_load_dir(temp_dir, &kb, &err) == 0, "own documents: %s", err.message);
  if (kb) {
    int idx[4];
    CHECK(kb_num_documents(kb) == 2 && kb_num_passages(kb) == 3, "own documents: %d docs %d passages",
          kb_num_documents(kb), kb_num_passages(kb));
    CHECK(kb_search(kb, "locker rent", 4, idx, NULL, &err) == 1 && idx[0] == 0, "own documents: locker");
    CHECK(kb_search(kb, "खाता बंद", 4, idx, NULL, &err) == 1 && idx[0] == 1, "own documents: Devanagari");
    CHECK(strcmp(kb_passage(kb, 2)->doc_id, "other") == 0, "files load in name order");
    kb_free(kb);
  }
  clear_dir();
  rmdir(temp_dir);
}

// ------------------------------------------------------------ hostile queries

static void test_hostile_queries(const KnowledgeBase *kb) {
  int idx[8];
  double scores[8];
  FimiError err = {0};
  CHECK(kb_search(kb, "", 8, idx, scores, &err) == 0, "empty query");
  CHECK(kb_search(kb, "  ?!.,;- ₹ ।  ", 8, idx, scores, &err) == 0, "punctuation-only query");
  CHECK(kb_search(kb, "the of and is", 8, idx, scores, &err) == 0, "stop words only");
  CHECK(kb_search(kb, "zzqxj unknownword", 8, idx, scores, &err) == 0, "unknown words");
  CHECK(kb_search(kb, "gold loan", 0, idx, scores, &err) == 0, "k = 0");
  CHECK(kb_search(kb, "gold loan", -1, idx, scores, &err) == -1, "k < 0 must fail");
  CHECK(kb_search(kb, NULL, 8, idx, scores, &err) == -1, "NULL query must fail");
  CHECK(kb_search(kb, "gold loan", 8, idx, NULL, &err) > 0, "scores may be NULL");
  // The largest allowed query (every word a known term, repeated) and one byte more.
  char *big = malloc(KB_MAX_QUERY_BYTES + 2);
  for (int i = 0; i < KB_MAX_QUERY_BYTES; i++) big[i] = "gold loan cheque kyc "[i % 21];
  big[KB_MAX_QUERY_BYTES] = '\0';
  CHECK(kb_search(kb, big, 8, idx, scores, &err) > 0, "largest query: %s", err.message);
  big[KB_MAX_QUERY_BYTES] = 'x';
  big[KB_MAX_QUERY_BYTES + 1] = '\0';
  CHECK(kb_search(kb, big, 8, idx, scores, &err) == -1 && strstr(err.message, "longer"), "oversized query accepted");
  // Random bytes (fixed seed): never crash, results stay in range and ordered.
  unsigned state = 12345;
  for (int round = 0; round < 2000; round++) {
    int length = round % 300;
    for (int i = 0; i < length; i++) {
      state = state * 1103515245u + 12345u;
      big[i] = (char)(1 + (state >> 16) % 255);
    }
    big[length] = '\0';
    int found = kb_search(kb, big, 8, idx, scores, &err);
    CHECK(found >= 0 && found <= 8, "random query %d: %d", round, found);
    for (int i = 0; i < found; i++) CHECK(idx[i] >= 0 && idx[i] < kb_num_passages(kb) && scores[i] > 0, "random %d", round);
  }
  free(big);
  // k larger than the number of passages.
  int n = kb_num_passages(kb);
  int *all = malloc((size_t)(n + 10) * sizeof *all);
  int found = kb_search(kb, "bank", n + 10, all, NULL, &err);
  CHECK(found > 0 && found <= n, "k > passages: %d", found);
  free(all);
}

int main(void) {
  test_tokenizer();
  test_builtin_documents();
  FimiError err = {0};
  const KnowledgeBase *kb = kb_builtin(&err);
  CHECK(kb != NULL, "kb_builtin: %s", err.message);
  CHECK(kb_builtin(NULL) == kb, "kb_builtin returns one shared instance");
  if (kb) {
    test_retrieval_quality(kb);
    test_bm25_reference(kb);
    test_determinism(kb);
    test_hostile_queries(kb);
  }
  test_malformed_documents();
  TEST_MAIN_END();
}
