// dpo/rephrase.c: the rubric, the critique and the revision prompt of the
// self-rephrased preferred side (dpo/rephrase.h).
#include "dpo/rephrase.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const SOURCE_NAMES[DPO_CHOSEN_COUNT] = {"reference", "self_rephrase"};

const char *dpo_chosen_source_name(DpoChosenSource s) {
  return s >= 0 && s < DPO_CHOSEN_COUNT ? SOURCE_NAMES[s] : "unknown";
}

int dpo_chosen_source_parse(const char *flag_value, DpoChosenSource *out, FimiError *err) {
  if (flag_value && !strcmp(flag_value, "reference")) *out = DPO_CHOSEN_REFERENCE;
  else if (flag_value && !strcmp(flag_value, "self-rephrase")) *out = DPO_CHOSEN_SELF_REPHRASE;
  else return fimi_fail(err, "--chosen \"%s\": expected reference or self-rephrase", flag_value ? flag_value : "");
  return 0;
}

// The rules every turn is checked against (docs/dpo-pairs.md, section 5),
// said as a reviewer would.
static const char RUBRIC[] =
    "Review your last turn. Rewrite it with the smallest change that makes it follow these rules:\n"
    "1. When the customer's request needs a tool, call exactly one tool, with arguments taken from the "
    "conversation.\n"
    "2. State only values the customer or a tool result gave.\n"
    "3. Ask for any detail you still need before acting.\n"
    "4. Before a charged action, state the charge and ask the customer to confirm.\n"
    "5. Refuse requests the bank does not serve, and say so.\n";

// What failed, without the reference's answer.
static const char *critique(DpoTag tag) {
  switch (tag) {
    case DPO_TAG_WRONG_TOOL_OR_ARGS: return "The tool call is not the right one, or its arguments do not match the conversation.";
    case DPO_TAG_REPLIED_INSTEAD_OF_CALLING: return "This turn should have been a tool call, not a message.";
    case DPO_TAG_CALLED_INSTEAD_OF_REPLYING: return "This turn should have been a message to the customer, not a tool call.";
    case DPO_TAG_BAD_REPLY: return "The message breaks a rule:";
    default: return "";
  }
}

char *dpo_rephrase_request(const DpoDivergence *dv, FimiError *err) {
  // A bad reply's detail is the judge's reason (a value lacking or invented,
  // a question not asked); the structural tags' details name the reference's
  // tool, so only the tag's rule is said for them.
  const char *why = dv->tag == DPO_TAG_BAD_REPLY ? dv->detail : "";
  size_t size = sizeof RUBRIC + strlen(critique(dv->tag)) + strlen(why) + 96;
  char *text = fimi_malloc(size, err);
  if (!text) return NULL;
  snprintf(text, size, "%sProblem: %s%s%s\nReply with the corrected turn only.", RUBRIC, critique(dv->tag),
           why[0] ? " " : "", why);
  return text;
}

cJSON *dpo_rephrase_prefix(const cJSON *prefix, const cJSON *rejected, const DpoDivergence *dv, FimiError *err) {
  char *request = dpo_rephrase_request(dv, err);
  if (!request) return NULL;
  cJSON *out = cJSON_Duplicate(prefix, 1), *turn = cJSON_Duplicate(rejected, 1), *user = cJSON_CreateObject();
  int ok = out && turn && user && cJSON_AddStringToObject(user, "role", "user") &&
           cJSON_AddStringToObject(user, "content", request);
  free(request);
  if (!ok) {
    cJSON_Delete(out), cJSON_Delete(turn), cJSON_Delete(user);
    fimi_fail(err, "rephrase: out of memory");
    return NULL;
  }
  cJSON_AddItemToArray(out, turn);
  cJSON_AddItemToArray(out, user);
  return out;
}
