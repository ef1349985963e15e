// How the CLI reports a failure: one line on stderr, "rosetta: error: <message>", and a
// non-zero exit status, whatever failed and on whichever thread.
#pragma once

#include <exception>
#include <string>

namespace rosetta::cli {

// The line for a failure: "rosetta: error: " and `message` with line breaks and other control
// characters escaped, so that a value quoted from a bad file cannot split the line or reach the
// terminal raw. Flushes stdout first.
void print_error(const std::string& message);

// What to say about `e`: its what(), except for an allocation that failed (std::bad_alloc, whose
// what() says nothing), which is explained.
std::string error_message(const std::exception& e);

// An exception that escapes a thread or an OpenMP region reaches std::terminate, which would
// abort with "terminate called after throwing ...". With this handler installed it is reported
// as main reports errors, one line, and the process exits with status 1. (std::terminate
// without an exception still aborts.)
void report_escaped_exceptions();

}  // namespace rosetta::cli
