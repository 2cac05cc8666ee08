/* The C entry point of mme: one JSON request in, one JSON document out.
 *
 *   char* doc = mme_run("{\"command\": \"estimate\", \"args\": {\"model\": \"deepseek-ai/DeepSeek-V3\", "
 *                       "\"tp\": 4, \"pp\": 4, \"ep\": 8, \"num_gpus\": 128}}");
 *   ... parse doc: {"api_version": 1, "ok": true, "exit_code": 0, "result": {...}, "log": [...]} ...
 *   mme_free(doc);
 *
 * The request is read into the typed request of mme's command layer and runs the use case
 * `mme COMMAND ARGS --json` runs (with the built-in plugins linked in); the response carries its
 * JSON document, or the error the CLI would print with its exit code. docs/python.md ("The C
 * entry point") describes the request and response formats. Plain C: no C++ type crosses this
 * interface, and the library (libmme_c) exports nothing else.
 *
 * Thread safety: calls may come from any thread and run concurrently; each request has its own
 * context (no lock, no environment variable set, nothing redirected). */
#ifndef MME_MME_C_H
#define MME_MME_C_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MME_C_EXPORT __attribute__((visibility("default")))
#else
#define MME_C_EXPORT
#endif

/* The version of the request and response formats (the "api_version" of both). A new field is
 * not a new version; a changed meaning is. */
#define MME_C_API_VERSION 1

/* Runs one request (a NUL-terminated UTF-8 JSON text). Returns a NUL-terminated JSON text
 * allocated with malloc, to be released with mme_free: the result document ("ok": true) or an
 * error document ("ok": false, "exit_code" as the CLI's, "error": {"type", "message"}).
 * Never throws; returns NULL only when even the error document cannot be allocated. */
MME_C_EXPORT char* mme_run(const char* request_json);

/* Releases a document mme_run returned (NULL is allowed). */
MME_C_EXPORT void mme_free(char* document);

/* MME_C_API_VERSION of the library actually loaded. */
MME_C_EXPORT int mme_c_api_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MME_MME_C_H */
