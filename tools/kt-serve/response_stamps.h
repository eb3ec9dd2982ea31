// The ids and times that responses carry: OpenAI's "chatcmpl-..." ids and
// Unix "created" seconds, Ollama's RFC 3339 "created_at".
#pragma once

#include <cstdint>
#include <string>

namespace kt::serve {

std::string random_id(const char* prefix);  // prefix + 24 random alphanumerics
int64_t unix_now();
std::string rfc3339_now();                  // "2025-01-02T03:04:05.123456789Z"
std::string rfc3339(int64_t unix_seconds);  // "2025-01-02T03:04:05Z"

}  // namespace kt::serve
