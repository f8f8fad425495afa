// Byte sizes as users write them on the command line and in scenario files, and as oomguard prints them.
//
//   int64_t bytes; std::string err;
//   if (!oomguard::ParseByteSize("15.5GB", &bytes, &err)) { ... err names what is accepted ... }
//   oomguard::FormatBytes(15'828'254'720)  // "14.74 GiB", the way PyTorch's OOM message prints it
//
// Error policy: parsing never throws; it returns false and fills *error with a one-line message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace oomguard {

// Accepts a non-negative number (integer, decimal or scientific: "1024", "15.5", "1e9") followed by an
// optional unit, optionally separated by one space. Decimal units: B, KB, MB, GB, TB (powers of 1000);
// binary units: KiB, MiB, GiB, TiB (powers of 1024). Units are case-insensitive. The result must be a
// whole number of bytes that fits in int64_t.
[[nodiscard]] bool ParseByteSize(std::string_view text, int64_t* bytes, std::string* error);

// "N bytes" up to 1 KiB, then KiB, MiB or GiB with two decimals (c10's format_size, so our messages
// read like PyTorch's).
std::string FormatBytes(int64_t bytes);

// FormatBytes with an explicit sign, for deltas: "+1.50 MiB", "-512 bytes", "0 bytes".
std::string FormatSignedBytes(int64_t bytes);

}  // namespace oomguard
