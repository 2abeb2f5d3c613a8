// Parsers of numbers, byte sizes and lists, shared by the flags and by structured values
// (model specs, compute specs, sweeps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/status.h"

namespace zb {

// Byte sizes: 4194304, 4M, 4MiB, 1.5G (K, M, G, T are powers of 1024).
Status parse_bytes(const std::string& text, uint64_t* out);
Status parse_double(const std::string& text, double* out);
Status parse_int(const std::string& text, int64_t* out);
std::vector<std::string> split(const std::string& text, char sep);
std::string join(const std::vector<std::string>& parts, const std::string& sep);

}  // namespace zb
