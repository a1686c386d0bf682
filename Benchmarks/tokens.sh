#!/usr/bin/env bash
# Signed tokens verified per CPU-second, on one thread: HS256 through the server's own check
# (SignedToken.verify), RS256, PS256 and ES256 as a relying party checks an identity provider's
# token (parts decoded, header and claims parsed, the key found in its JWK set, the signature
# checked), all on libcrypto through the core's Cryptography. The tokens and keys are
# Tests/fixtures/jwt-signatures.json (PyJWT's); `openssl speed` on the same machine is printed
# beside them for the raw signature checks. Prints a Markdown section on stdout (Benchmarks/run
# puts it in RESULTS.md); progress goes to stderr.
#
#   Benchmarks/tokens.sh              # 5 rounds of 1 CPU-second per algorithm
#   Benchmarks/tokens.sh --quick      # 3 rounds of 0.3 CPU-second
. "$(dirname "$0")/lib.sh"
options="quick"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
# shellcheck disable=SC2154 # parse_options sets quick (printf -v)
if [ "$quick" = 1 ]; then rounds=3; seconds=0.3; else rounds=5; seconds=1; fi

build_release ringcast-tokens

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "### Tokens verified per CPU-second"
echo
echo "\`$bin/ringcast-tokens --rounds $rounds --seconds $seconds\` (release build, one thread; CPU time is the"
echo "thread's own, \`CLOCK_THREAD_CPUTIME_ID\`). Cells: median of $rounds rounds (min–max)."
echo
"${pin_server[@]}" "$bin/ringcast-tokens" --rounds "$rounds" --seconds "$seconds"
echo
echo "libcrypto alone, \`openssl speed -seconds $seconds rsa2048 ecdsap256\` ($(openssl version | cut -d' ' -f1-2)), verifications per second of CPU:"
echo
speed=$("${pin_server[@]}" openssl speed -seconds "$seconds" rsa2048 ecdsap256 2>/dev/null)
echo "| signature | verify/s |"
echo "| --- | --- |"
echo "$speed" | awk '/^rsa 2048 bits/ {printf "| RSA 2048 | %s |\n", $7} /^ 256 bits ecdsa \(nistp256\)/ {printf "| ECDSA P-256 | %s |\n", $8}'
echo
echo "Load average (1, 5, 15 min): $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after."
