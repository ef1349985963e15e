// Text inside the report's HTML page and SVG (XML) documents: the layer's one escaper.
#pragma once

#include <string>
#include <string_view>

namespace rosetta::report {

// `text` as character data or an attribute value of HTML or XML: & < > " ' become &amp; &lt;
// &gt; &quot; &#39; (a character reference both read), and the control characters XML 1.0
// forbids (those below 0x20 but tab, newline and carriage return) are dropped. Every other
// byte, UTF-8 included, is kept as it is.
std::string escape_markup(std::string_view text);

}  // namespace rosetta::report
