#include "tools/kt-serve/response_stamps.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

namespace kt::serve {

std::string random_id(const char* prefix) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += alphabet[rng() % (sizeof alphabet - 1)];
  return id;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string rfc3339(int64_t unix_seconds) {
  const std::time_t t = std::time_t(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string rfc3339_now() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
  std::string s = rfc3339(ns / 1000000000);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%09lld", (long long)(ns % 1000000000));
  return s.substr(0, s.size() - 1) + frac + "Z";
}

}  // namespace kt::serve
