#include "errors.h"

#include <cstdio>
#include <cstdlib>
#include <new>

namespace rosetta::cli {

namespace {

std::string one_line(const std::string& what) {
  std::string out;
  for (const char ch : what) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += " | ";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

[[noreturn]] void on_terminate() {
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      print_error(error_message(x));
    } catch (...) {
      print_error("an unknown exception escaped a thread");
    }
    std::fflush(stderr);
    std::_Exit(1);  // other threads may still run: no static destructors
  }
  std::abort();
}

}  // namespace

void print_error(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "rosetta: error: %s\n", one_line(message).c_str());
}

std::string error_message(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return "out of memory: an allocation failed (std::bad_alloc); the model or the batch does not fit in "
           "the memory of this machine: use a smaller one (train: --d-model, --ff, --max-tokens; translate "
           "and eval: --batch-tokens, --beam)";
  return e.what();
}

void report_escaped_exceptions() { std::set_terminate(on_terminate); }

}  // namespace rosetta::cli
