/* libdiode_client.so: the stable C ABI of the pull client, for the Python
 * Inductor hook (ctypes) and anything else that cannot link C++.
 * Strings are NUL-terminated UTF-8. Output buffers are always NUL-terminated
 * when their length is nonzero. Thread-safe; concurrent pulls into one cache
 * are serialised by a lock file. */
#ifndef DIODE_CLIENT_H
#define DIODE_CLIENT_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DIODE_CLIENT_ABI_VERSION 1

#if defined(__GNUC__)
#define DIODE_CLIENT_API __attribute__((visibility("default")))
#else
#define DIODE_CLIENT_API
#endif

enum diode_client_status {
  DIODE_OK = 0,            /* fresh from the hub (or already cached and current) */
  DIODE_OK_OFFLINE = 1,    /* hub unreachable, not given, or serving expired metadata: the verified cached bundle; err_buf says why */
  DIODE_ERR_ARGUMENT = -1, /* bad hub URL, hardware key, root key, or NULL */
  DIODE_ERR_NETWORK = -2,  /* hub unreachable and nothing usable cached */
  DIODE_ERR_VERIFY = -3,   /* rejected: signature, hash, size, version, expiry, name; the cache is untouched */
  DIODE_ERR_HTTP = -4,     /* the hub answered with an HTTP error (e.g. 404: no model for this hardware) */
  DIODE_ERR_IO = -5,       /* local file system error */
  DIODE_ERR_BUFFER = -6    /* out_path_buf too small for the path */
};

/* Pulls the current bundle for `hardware_key` from `hub_url` (https://, or
 * http:// to loopback only; NULL or "" = offline from the cache), verifies it
 * against `root_pubkey_hex` (64 hex characters: the pinned Ed25519 root key)
 * and the cache's trust state, and writes the bundle directory's path to
 * out_path_buf. cache_dir NULL or "" = $DIODE_CACHE_DIR, $XDG_CACHE_HOME/diode
 * or ~/.cache/diode. */
DIODE_CLIENT_API int diode_client_pull(const char* hub_url, const char* hardware_key, const char* cache_dir,
                      const char* root_pubkey_hex, char* out_path_buf, size_t buf_len, char* err_buf,
                      size_t err_len);

/* Verifies a bundle directory on its own (its roots.json chain anchored at
 * root_pubkey_hex, bundle.json, every file). Returns DIODE_OK or an error. */
DIODE_CLIENT_API int diode_client_verify(const char* bundle_dir, const char* root_pubkey_hex, char* err_buf, size_t err_len);

/* diode_client_pull for the bundle of decision family `family` ("gemm", the same
 * as diode_client_pull, or "scaled_mm", ...: served at <hub>/v1/models/<hw>/families/
 * <family>/ and cached under <cache>/<hw>/families/<family>/). An unknown family is
 * DIODE_ERR_ARGUMENT; a bundle whose signed family differs is DIODE_ERR_VERIFY.
 * Added to ABI 1: a library without this symbol serves GEMM bundles only. */
DIODE_CLIENT_API int diode_client_pull_family(const char* hub_url, const char* hardware_key, const char* family,
                      const char* cache_dir, const char* root_pubkey_hex, char* out_path_buf, size_t buf_len,
                      char* err_buf, size_t err_len);
/* diode_client_verify, and the bundle's signed decision family (absent = "gemm")
 * must be `family`. */
DIODE_CLIENT_API int diode_client_verify_family(const char* bundle_dir, const char* family, const char* root_pubkey_hex,
                      char* err_buf, size_t err_len);
/* "diode-client <version> abi <n>"; a static string. */
DIODE_CLIENT_API const char* diode_client_version(void);

#ifdef __cplusplus
}
#endif
#endif
