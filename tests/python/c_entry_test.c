/* The C entry point from C (mme_c.h): one estimate and one error, each compared with what the
 * `mme` executable prints for the same arguments.
 *
 *   mme_c_entry_test PATH/TO/mme
 *
 * The estimate: the peak stage's total_bytes of the response's result equals the one of
 * `mme estimate ... --json`; the error: exit code 4 (LayoutError) and the message of the CLI's
 * `mme: error: ...` line. Exit status 0 when every check holds. */
#include <mme/mme_c.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      fprintf(stderr, "FAILED %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);          \
      fprintf(stderr, "\n");                 \
      ++failures;                            \
    }                                        \
  } while (0)

/* Everything a command prints (stdout and, with " 2>&1" in the command, stderr). */
static char* run_command(const char* command, int* status) {
  FILE* p = popen(command, "r");
  if (!p) return NULL;
  size_t size = 0, cap = 1 << 16;
  char* out = malloc(cap);
  size_t n;
  while (out && (n = fread(out + size, 1, cap - size - 1, p)) > 0) {
    size += n;
    if (cap - size < 2) {
      char* grown = realloc(out, cap * 2);
      if (!grown) {
        free(out);
        out = NULL;
        break;
      }
      out = grown;
      cap *= 2;
    }
  }
  *status = pclose(p);
  if (out) out[size] = '\0';
  return out;
}

/* The integer after the key `"name":` that follows the first `"after":` key in a JSON text (a
 * quote inside a JSON string is escaped, so a key pattern only matches keys). */
static long long int_after(const char* json, const char* after, const char* name) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":", after);
  const char* at = strstr(json, key);
  if (!at) return -1;
  snprintf(key, sizeof key, "\"%s\":", name);
  at = strstr(at, key);
  if (!at) return -1;
  at += strlen(key);
  while (*at == ' ') ++at;
  return strtoll(at, NULL, 10);
}

/* The JSON string value of `"name":` (the first one), unescaped into a malloc'ed text. */
static char* string_value(const char* json, const char* name) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":\"", name);
  const char* at = strstr(json, key);
  if (!at) return NULL;
  at += strlen(key);
  char* out = malloc(strlen(at) + 1);
  char* o = out;
  for (; *at && *at != '"'; ++at) {
    if (*at == '\\') {
      ++at;
      switch (*at) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'u':
          *o++ = '?';
          at += 4;
          break; /* not in the messages compared here */
        default: *o++ = *at;
      }
    } else {
      *o++ = *at;
    }
  }
  *o = '\0';
  return out;
}

static const char* const kEstimateArgs =
    "deepseek-ai/DeepSeek-V3 --tp 4 --pp 4 --ep 8 --num-gpus 128 --num-layers-in-last-pipeline-stage 16";

/* A request nested 100,000 levels deep, run on a thread with a 256 KiB stack: a clear error, no
 * stack overflow (the old layer crashed on 4 KB of nesting in such a thread). */
static char* deep_request(void) {
  const size_t depth = 100000;
  const char* head = "{\"api_version\": ";
  const char* tail = ", \"command\": \"version\"}";
  char* text = malloc(strlen(head) + 2 * depth + strlen(tail) + 1);
  if (!text) return NULL;
  char* o = text;
  o += sprintf(o, "%s", head);
  memset(o, '[', depth);
  memset(o + depth, ']', depth);
  o += 2 * depth;
  strcpy(o, tail);
  return text;
}

static void* run_on_thread(void* request) { return mme_run((const char*)request); }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH/TO/mme\n", argv[0]);
    return 2;
  }
  CHECK(mme_c_api_version() == MME_C_API_VERSION, "api version %d", mme_c_api_version());

  /* One estimate. */
  char* doc = mme_run(
      "{\"api_version\": 1, \"command\": \"estimate\", \"args\": {\"model\": \"deepseek-ai/DeepSeek-V3\", "
      "\"tp\": 4, \"pp\": 4, \"ep\": 8, \"num_gpus\": 128, \"num_layers_in_last_pipeline_stage\": 16}}");
  CHECK(doc != NULL, "mme_run returned NULL");
  if (doc) {
    CHECK(strstr(doc, "\"ok\":true") != NULL, "not ok: %.300s", doc);
    CHECK(strstr(doc, "\"exit_code\":0") != NULL, "exit code: %.300s", doc);
    CHECK(strstr(doc, "\"schema_version\":1") != NULL, "no estimate document: %.300s", doc);
    char command[4096];
    snprintf(command, sizeof command, "'%s' estimate %s --json", argv[1], kEstimateArgs);
    int status = 0;
    char* cli = run_command(command, &status);
    CHECK(cli != NULL && status == 0, "`%s` failed", command);
    if (cli) {
      const long long mine = int_after(doc, "peak", "total_bytes"), theirs = int_after(cli, "peak", "total_bytes");
      CHECK(mine > 0 && mine == theirs, "peak total_bytes %lld (C entry point) and %lld (mme)", mine, theirs);
      const long long rank = int_after(doc, "peak", "pp_rank"), cli_rank = int_after(cli, "peak", "pp_rank");
      CHECK(rank == cli_rank, "peak pp_rank %lld and %lld", rank, cli_rank);
      free(cli);
    }
    mme_free(doc);
  }

  /* One error: TP 3 does not divide DeepSeek-V3's 128 attention heads. */
  doc = mme_run("{\"command\": \"estimate\", \"args\": {\"model\": \"deepseek-ai/DeepSeek-V3\", \"tp\": 3}}");
  CHECK(doc != NULL, "mme_run returned NULL");
  if (doc) {
    CHECK(strstr(doc, "\"ok\":false") != NULL, "not an error: %.300s", doc);
    CHECK(strstr(doc, "\"exit_code\":4") != NULL, "exit code: %.300s", doc);
    CHECK(strstr(doc, "\"type\":\"LayoutError\"") != NULL, "type: %.300s", doc);
    char command[4096];
    snprintf(command, sizeof command, "'%s' estimate deepseek-ai/DeepSeek-V3 --tp 3 2>&1", argv[1]);
    int status = 0;
    char* cli = run_command(command, &status);
    CHECK(cli != NULL && WIFEXITED(status) && WEXITSTATUS(status) == 4, "`%s`: status %d", command, status);
    char* message = string_value(doc, "message");
    CHECK(message != NULL, "no message: %.300s", doc);
    if (cli && message) {
      const char* prefix = "mme: error: ";
      CHECK(strncmp(cli, prefix, strlen(prefix)) == 0, "CLI printed: %.300s", cli);
      char* line = cli + strlen(prefix);
      line[strcspn(line, "\n")] = '\0';
      CHECK(strcmp(line, message) == 0, "messages differ:\n  C entry point: %s\n  mme:           %s", message, line);
    }
    free(message);
    free(cli);
    mme_free(doc);
  }

  /* A request that is not JSON, and NULL. */
  doc = mme_run("{not json");
  CHECK(doc && strstr(doc, "\"exit_code\":2") && strstr(doc, "\"type\":\"UsageError\""), "%s", doc ? doc : "NULL");
  mme_free(doc);
  doc = mme_run(NULL);
  CHECK(doc && strstr(doc, "\"exit_code\":2"), "%s", doc ? doc : "NULL");
  mme_free(doc);
  mme_free(NULL);

  /* Deep nesting, on a thread with a small stack. */
  char* deep = deep_request();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  void* answer = NULL;
  CHECK(deep && pthread_create(&thread, &attr, run_on_thread, deep) == 0, "no thread");
  if (deep) pthread_join(thread, &answer);
  doc = (char*)answer;
  CHECK(doc && strstr(doc, "\"exit_code\":2") && strstr(doc, "nests more than"), "%.300s", doc ? doc : "NULL");
  mme_free(doc);
  free(deep);
  pthread_attr_destroy(&attr);

  /* A model that starts with dashes is a name, not an option: no report file is written. */
  doc = mme_run("{\"command\": \"estimate\", \"args\": {\"model\": \"--html=mme_c_entry_test.html\"}}");
  CHECK(doc && strstr(doc, "\"type\":\"NotFoundError\""), "%.300s", doc ? doc : "NULL");
  FILE* written = fopen("mme_c_entry_test.html", "r");
  CHECK(written == NULL, "the model name wrote a file");
  if (written) fclose(written);
  mme_free(doc);

  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("C entry point: all checks passed\n");
  return failures ? 1 : 0;
}
