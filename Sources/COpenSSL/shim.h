#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
/* libcrypto of OpenSSL 3 (Debian's libssl-dev), the library libwebsockets and libcurl already load:
   hashes, MACs, randomness and public-key verification through EVP only. */
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

/* EVP_PKEY_PUBLIC_KEY is an expression of other macros, which Swift does not import. */
static const int rc_evp_pkey_public_key = EVP_PKEY_PUBLIC_KEY;
#endif
