// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which sanitizer this translation unit is built with. The build types Tsan, Asan and
// Fuzz define KILN_THREAD_SANITIZER / KILN_ADDRESS_SANITIZER (CMakeLists.txt); otherwise GCC's
// __SANITIZE_*__ or Clang's __has_feature tell.
//
//   if (kiln::kAddressSanitizer) GTEST_SKIP() << "RSS is not measurable under ASan";
//   #if defined(KILN_THREAD_SANITIZER) ... #endif

#if !defined(KILN_THREAD_SANITIZER)
#if defined(__SANITIZE_THREAD__)
#define KILN_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_THREAD_SANITIZER 1
#endif
#endif
#endif

#if !defined(KILN_ADDRESS_SANITIZER)
#if defined(__SANITIZE_ADDRESS__)
#define KILN_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ADDRESS_SANITIZER 1
#endif
#endif
#endif

namespace kiln {

#if defined(KILN_THREAD_SANITIZER)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#if defined(KILN_ADDRESS_SANITIZER)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace kiln
