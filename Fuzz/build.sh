#!/usr/bin/env bash
# Builds the libFuzzer targets into .build/fuzz/: RingcastCore once, as a static library instrumented
# for libFuzzer's coverage and AddressSanitizer, RingcastCrypto (the core's Cryptography on
# libcrypto) likewise, then one executable per Fuzz/Targets/*.swift with Fuzz/Support linked in. Rebuilds only what its sources have changed. Needs nothing the Swift
# toolchain does not ship (libFuzzer, ASan and lld are in it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
out=.build/fuzz
mkdir -p "$out/lib"
# shellcheck disable=SC2054 # the comma is part of one flag
flags=(-O -g -sanitize=fuzzer,address -parse-as-library -swift-version 6)

stale() {  # stale OUTPUT INPUT...: whether OUTPUT is missing or older than any INPUT
  local output=$1; shift
  [ ! -e "$output" ] && return 0
  for input in "$@"; do [ "$input" -nt "$output" ] && return 0; done
  return 1
}

mapfile -t core < <(find Sources/RingcastCore -name "*.swift" | sort)
library=$out/lib/libRingcastCore.a
if stale "$library" "${core[@]}" "$0"; then
  echo "fuzz: building RingcastCore for libFuzzer"
  swiftc "${flags[@]}" -emit-library -static -module-name RingcastCore \
    -emit-module -emit-module-path "$out/lib/RingcastCore.swiftmodule" "${core[@]}" -o "$library"
fi

mapfile -t crypto < <(find Sources/RingcastCrypto -name "*.swift" | sort)
cryptoLibrary=$out/lib/libRingcastCrypto.a
if stale "$cryptoLibrary" "$library" "${crypto[@]}" Sources/COpenSSL/shim.h "$0"; then
  echo "fuzz: building RingcastCrypto for libFuzzer"
  swiftc "${flags[@]}" -emit-library -static -module-name RingcastCrypto -I "$out/lib" -I Sources/COpenSSL \
    -emit-module -emit-module-path "$out/lib/RingcastCrypto.swiftmodule" "${crypto[@]}" -o "$cryptoLibrary"
fi

support=(Fuzz/Support/*.swift Tests/SchemaValidation/*.swift)
for target in Fuzz/Targets/*.swift; do
  name=$(basename "$target" .swift)
  if stale "$out/$name" "$library" "$cryptoLibrary" "$target" "${support[@]}"; then
    echo "fuzz: building $name"
    swiftc "${flags[@]}" -use-ld=lld -module-name "Fuzz_$name" -I "$out/lib" -I Sources/COpenSSL -L "$out/lib" \
      -lRingcastCrypto -lRingcastCore -lcrypto \
      "$target" "${support[@]}" -o "$out/$name"
  fi
done
