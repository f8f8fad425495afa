// Whether this build runs under AddressSanitizer (gcc's __SANITIZE_ADDRESS__, clang's __has_feature):
// code that would hide what it checks (a free list of blocks, an exit without atexit handlers, where
// LeakSanitizer reports) does the plain thing instead.
#pragma once

namespace oomguard {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace oomguard
