// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test-only helper for deterministic mutation ("fuzz") tests of parsers: MutateBytes applies 1-4
// random edits to a valid seed (bit flips, byte replacements and insertions steered toward
// format-relevant bytes, short deletions, truncation, splices, odd numbers). Same seed and rng
// state give the same output, so a failure reproduces.
//
//   std::mt19937 rng(1);
//   for (int i = 0; i < 5000; ++i) {
//     std::string bytes = testing::MutateBytes(seed, rng, "[]{}\",:0123456789");
//     Result<X> r = Parse(bytes);  // must be a value or an error, never a crash
//   }

#include <algorithm>
#include <random>
#include <string>
#include <string_view>

namespace kiln::testing {

// `interesting`: bytes that matter to the format (JSON punctuation, header characters, ...);
// empty uses arbitrary bytes only.
inline std::string MutateBytes(std::string_view seed, std::mt19937& rng,
                               std::string_view interesting = {}) {
  static constexpr const char* kNumbers[] = {
      "99999999999999999999999", "-1", "1e400", "0.5", "-0", "4294967296", "1e-400",
      "18446744073709551616"};
  std::string s(seed);
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    const char pick =
        interesting.empty() ? static_cast<char>(rng()) : interesting[rng() % interesting.size()];
    switch (rng() % 8) {
      case 0:  // flip one bit
        if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      case 1:  // replace with an interesting byte
        if (!s.empty()) s[pos] = pick;
        break;
      case 2:  // replace with any byte
        if (!s.empty()) s[pos] = static_cast<char>(rng());
        break;
      case 3:  // insert
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), pick);
        break;
      case 4:  // delete a short range
        s.erase(pos, 1 + rng() % 8);
        break;
      case 5:  // truncate
        s.resize(pos);
        break;
      case 6: {  // duplicate a range somewhere else
        if (s.empty()) break;
        const size_t len = 1 + rng() % std::min<size_t>(s.size() - pos, 32);
        const std::string piece = s.substr(pos, len);
        s.insert(rng() % (s.size() + 1), piece);
        break;
      }
      default:  // insert a big or odd number
        s.insert(pos, kNumbers[rng() % std::size(kNumbers)]);
        break;
    }
  }
  return s;
}

}  // namespace kiln::testing
