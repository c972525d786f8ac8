// cudasim_rewrite — turns a CUDA source file into a host C++ translation unit for the simulator.
//
// Usage: cudasim_rewrite <in.cu> <out.cpp> [<out.d>]
//
// Only two constructs of CUDA C are not valid host C++, so only they are rewritten (and static
// shared arrays, for the checked build's memcheck):
//   callee<<<grid, block[, smem[, stream]]>>>(args...)
//       -> ::cudasim::detail::launch(__FILE__, __LINE__, "callee", callee, grid, block...)(args...)
//   extern __shared__ [__align__(N)] T name[];          (inside a function)
//       -> T *name = reinterpret_cast<T *>(::cudasim::dynamic_shared_memory());
//   __shared__ [__align__(N)] T name[A][B];             (inside a function)
//       -> __shared__ [__align__(N)] ::cudasim::shared_array<T[A][B]> name__cudasim_array;
//          auto &name = ::cudasim::shared_array_ref(name__cudasim_array, "name");
//      (kernel.h: in the checked build the array is followed by a guard that memcheck knows)
//   #include "header.cuh"   (found next to the .cu)
//       -> #include "/absolute/dir/header.cuh"   (the output lives elsewhere, in the build tree)
//   ... and a header found that way which itself launches kernels (a kernel shared by two
//       examples, with its launcher) is rewritten the same way, into <out.cpp>.h/<n>.h beside the
//       output, and included from there; <out.d>, when given, lists those headers for the build
//       (a make-style depfile), so that editing one rewrites the .cu again.
// and one that is valid C++ but behaves otherwise on a GPU:
//   reinterpret_cast<const float4 *>(x)   (static_cast too; any vector type wider than its
//                                          element: float2, float4, int4, uint4, double2, ...)
//       -> ::cudasim::detail::vector_reinterpret_cast<const float4 *>(__FILE__, __LINE__,
//                                                                    "const float4 *", x)
//      which reports a pointer a GPU's vector access would fault on (misaligned), in a kernel.
// Everything else is copied byte for byte. A rewritten construct keeps its newlines, and the output
// starts with `#line 1 "<original path>"`, so diagnostics, __FILE__ and __LINE__ point at the .cu.
//
// The scanner tokenizes just enough C++ to skip comments, string and character literals, and to
// track braces (to tell function bodies from namespace scope).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

enum class tok_kind { ident, number, literal, punct };

struct token {
    tok_kind kind;
    size_t begin, end; // byte range in the source
    bool directive;    // part of a preprocessor line
};

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class tokenizer {
  public:
    explicit tokenizer(const std::string &s) : s_(s) {}

    std::vector<token> run() {
        std::vector<token> out;
        bool line_start = true, in_directive = false;
        size_t i = 0;
        while (i < s_.size()) {
            char c = s_[i];
            if (c == '\n') {
                // A directive ends at a newline that is not spliced by a backslash.
                if (in_directive && !(i > 0 && s_[i - 1] == '\\'))
                    in_directive = false;
                line_start = true;
                ++i;
                continue;
            }
            if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\\') {
                ++i;
                continue;
            }
            if (c == '/' && at(i + 1) == '/') {
                while (i < s_.size() && s_[i] != '\n')
                    ++i;
                continue;
            }
            if (c == '/' && at(i + 1) == '*') {
                size_t e = s_.find("*/", i + 2);
                i = e == std::string::npos ? s_.size() : e + 2;
                continue;
            }
            if (c == '#' && line_start)
                in_directive = true;
            line_start = false;
            size_t b = i;
            tok_kind k;
            if (size_t e = literal_end(i)) {
                i = e;
                k = tok_kind::literal;
            } else if (is_ident_start(c)) {
                while (i < s_.size() && is_ident_char(s_[i]))
                    ++i;
                k = tok_kind::ident;
            } else if (is_digit(c) || (c == '.' && is_digit(at(i + 1)))) {
                i = number_end(i);
                k = tok_kind::number;
            } else {
                i += (c == ':' && at(i + 1) == ':') ? 2 : 1;
                k = tok_kind::punct;
            }
            out.push_back({k, b, i, in_directive});
        }
        return out;
    }

  private:
    char at(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }

    // If a string or character literal (with an optional encoding prefix, raw or not) starts at
    // i, returns the index just past it; otherwise 0.
    size_t literal_end(size_t i) const {
        size_t p = i;
        if (s_.compare(p, 2, "u8") == 0)
            p += 2;
        else if (at(p) == 'u' || at(p) == 'U' || at(p) == 'L')
            p += 1;
        bool raw = at(p) == 'R' && at(p + 1) == '"';
        if (raw)
            p += 1;
        char q = at(p);
        if (q != '"' && q != '\'')
            return 0;
        if (raw) {
            size_t open = s_.find('(', p);
            if (open == std::string::npos)
                return s_.size();
            std::string close = ")" + s_.substr(p + 1, open - p - 1) + "\"";
            size_t e = s_.find(close, open);
            return e == std::string::npos ? s_.size() : e + close.size();
        }
        for (++p; p < s_.size() && s_[p] != q && s_[p] != '\n'; ++p)
            if (s_[p] == '\\')
                ++p;
        return p + 1;
    }

    // A preprocessing number: digits, letters, '.', digit separators and exponent signs.
    size_t number_end(size_t i) const {
        while (i < s_.size()) {
            char c = s_[i];
            if ((c == '+' || c == '-') && i > 0 &&
                (s_[i - 1] == 'e' || s_[i - 1] == 'E' || s_[i - 1] == 'p' || s_[i - 1] == 'P'))
                ++i;
            else if (is_ident_char(c) || c == '.' || (c == '\'' && is_ident_char(at(i + 1))))
                ++i;
            else
                break;
        }
        return i;
    }

    const std::string &s_;
};

std::string quote_path(const std::string &p) {
    std::string q = "\"";
    for (char c : p) {
        if (c == '"' || c == '\\')
            q += '\\';
        q += c;
    }
    return q + "\"";
}

// What one run shares among the rewriters of the .cu and the headers it pulls in: where rewritten
// headers go, and which ones were rewritten (for the depfile).
struct session {
    std::filesystem::path header_dir;
    std::vector<std::filesystem::path> rewritten; // originals, in order
};

std::string rewrite_file(const std::filesystem::path &path, session &ses);

class rewriter {
  public:
    rewriter(const std::string &src, std::filesystem::path dir, session &ses)
        : s_(src), t_(tokenizer(src).run()), dir_(std::move(dir)), ses_(ses) {}

    std::string run() {
        std::vector<bool> brace_is_block; // one entry per open brace: function/block scope?
        size_t stmt_start = 0;            // first token of the current statement or head
        for (size_t i = 0; i < t_.size(); ++i) {
            if (is_launch_open(i)) {
                i = rewrite_launch(i);
                continue;
            }
            if (t_[i].directive) {
                if (is(i, "#") && is(i + 1, "include") && i + 2 < t_.size() &&
                    s_[t_[i + 2].begin] == '"')
                    rewrite_local_include(i + 2);
                continue;
            }
            if ((is(i, "reinterpret_cast") || is(i, "static_cast")) && is(i + 1, "<")) {
                i = rewrite_vector_cast(i);
                continue;
            }
            if (is(i, "extern") && is(i + 1, "__shared__")) {
                bool block_scope = !brace_is_block.empty() && brace_is_block.back();
                i = rewrite_extern_shared(i, block_scope);
                stmt_start = i + 1;
                continue;
            }
            if (is(i, "__shared__") && i == stmt_start && !brace_is_block.empty() &&
                brace_is_block.back()) {
                size_t end = rewrite_static_shared(i);
                if (end != i) {
                    i = end;
                    stmt_start = i + 1;
                    continue;
                }
            }
            if (is(i, "{")) {
                brace_is_block.push_back((!brace_is_block.empty() && brace_is_block.back()) ||
                                         head_is_function(stmt_start, i));
                stmt_start = i + 1;
            } else if (is(i, "}")) {
                if (!brace_is_block.empty())
                    brace_is_block.pop_back();
                stmt_start = i + 1;
            } else if (is(i, ";")) {
                stmt_start = i + 1;
            }
        }
        out_.append(s_, copied_, std::string::npos);
        return out_;
    }

  private:
    std::string text(size_t i) const { return s_.substr(t_[i].begin, t_[i].end - t_[i].begin); }
    bool is(size_t i, const char *str) const {
        return i < t_.size() && s_.compare(t_[i].begin, t_[i].end - t_[i].begin, str) == 0;
    }
    bool adjacent(size_t i) const { return t_[i].end == t_[i + 1].begin; }

    bool is_launch_open(size_t i) const {
        return is(i, "<") && is(i + 1, "<") && is(i + 2, "<") && adjacent(i) && adjacent(i + 1);
    }
    bool is_launch_close(size_t i) const {
        return is(i, ">") && is(i + 1, ">") && is(i + 2, ">") && adjacent(i) && adjacent(i + 1);
    }

    // A brace opens a function body (block scope) if its head has a parameter list; namespace,
    // extern "C" and class bodies do not.
    bool head_is_function(size_t from, size_t brace) const {
        for (size_t j = from; j < brace; ++j)
            if (is(j, ")"))
                return true;
        return false;
    }

    size_t count_newlines(size_t b, size_t e) const {
        size_t n = 0;
        for (size_t k = b; k < e; ++k)
            n += s_[k] == '\n';
        return n;
    }

    // Index of the token that opens the bracket closed at `close` (scanning backwards), or npos.
    size_t match_backwards(size_t close, const char *open_s, const char *close_s) const {
        int depth = 0;
        for (size_t j = close + 1; j-- > 0;) {
            if (is(j, close_s))
                ++depth;
            else if (is(j, open_s) && --depth == 0)
                return j;
            else if (is(j, ";") || is(j, "{") || is(j, "}"))
                break;
        }
        return std::string::npos;
    }

    // First token of the callee before `<<<` at `open`: an identifier, a qualified name, a
    // template-id, or a parenthesised expression.
    size_t callee_start(size_t open) const {
        if (open == 0)
            return std::string::npos;
        size_t j = open - 1;
        if (is(j, ")"))
            return match_backwards(j, "(", ")");
        for (;;) {
            if (is(j, ">")) {
                size_t m = match_backwards(j, "<", ">");
                if (m == std::string::npos || m == 0)
                    return std::string::npos;
                j = m - 1;
            }
            if (t_[j].kind != tok_kind::ident)
                return std::string::npos;
            if (j > 0 && is(j - 1, "::")) {
                if (j - 1 == 0 || (t_[j - 2].kind != tok_kind::ident && !is(j - 2, ">")))
                    return j - 1; // leading '::'
                j -= 2;
                continue;
            }
            return j;
        }
    }

    // The parameters of the function-like #define whose body holds token i; none elsewhere.
    std::vector<std::string> macro_params(size_t i) const {
        if (!t_[i].directive)
            return {};
        size_t d = i;
        while (d > 0 && t_[d - 1].directive && !(is(d, "#") && is(d + 1, "define")))
            --d;
        if (!(is(d, "#") && is(d + 1, "define") && is(d + 3, "(") && adjacent(d + 2)))
            return {};
        std::vector<std::string> params;
        for (size_t j = d + 4; j < i && !is(j, ")"); ++j)
            if (t_[j].kind == tok_kind::ident)
                params.push_back(text(j));
        return params;
    }

    // The callee as a string literal: tokens joined, spaced only where C++ needs it. Inside a
    // function-like macro, a token that is a macro parameter is stringized (`#k`), so the name is
    // the kernel passed to the macro, not the parameter's.
    std::string callee_name(size_t b, size_t e) const {
        std::vector<std::string> params = macro_params(b);
        std::string lit, name;
        auto flush = [&] {
            if (name.empty())
                return;
            std::string escaped;
            for (char c : name) {
                if (c == '"' || c == '\\')
                    escaped += '\\';
                escaped += c;
            }
            lit += (lit.empty() ? "\"" : " \"") + escaped + "\"";
            name.clear();
        };
        for (size_t j = b; j < e; ++j) {
            bool word = t_[j].kind != tok_kind::punct;
            if (j > b && ((word && t_[j - 1].kind != tok_kind::punct) || is(j - 1, ",")))
                name += ' ';
            if (word && std::find(params.begin(), params.end(), text(j)) != params.end()) {
                flush();
                lit += (lit.empty() ? "#" : " #") + text(j);
            } else {
                name += text(j);
            }
        }
        flush();
        return lit;
    }

    size_t rewrite_launch(size_t open) {
        size_t cs = callee_start(open);
        int depth = 0;
        size_t close = std::string::npos;
        for (size_t j = open + 3; j + 2 < t_.size(); ++j) {
            if (is(j, "(") || is(j, "[") || is(j, "{"))
                ++depth;
            else if (is(j, ")") || is(j, "]") || is(j, "}"))
                --depth;
            else if (depth == 0 && is_launch_close(j)) {
                close = j;
                break;
            }
            if (depth < 0)
                break;
        }
        if (cs == std::string::npos || close == std::string::npos || t_[cs].begin < copied_)
            return open + 2; // not a launch we understand: leave it to the compiler's error
        out_.append(s_, copied_, t_[cs].begin - copied_);
        out_ += "::cudasim::detail::launch(__FILE__, __LINE__, " + callee_name(cs, open) + ", ";
        out_.append(s_, t_[cs].begin, t_[open - 1].end - t_[cs].begin);
        out_.append(count_newlines(t_[open - 1].end, t_[open].begin), '\n');
        out_ += ", ";
        out_.append(s_, t_[open + 2].end, t_[close].begin - t_[open + 2].end);
        out_ += ")";
        copied_ = t_[close + 2].end;
        return close + 2;
    }

    // Vector types whose alignment exceeds their element's: a pointer to one may be misaligned.
    static bool is_wide_vector(const std::string &name) {
        static const char *const bases[] = {"char",  "uchar",    "short",     "ushort",
                                            "int",   "uint",     "long",      "ulong",
                                            "float", "longlong", "ulonglong", "double"};
        for (const char *b : bases)
            for (const char *n : {"2", "4"})
                if (name == std::string(b) + n)
                    return true;
        return false;
    }

    // `reinterpret_cast<T>(` or `static_cast<T>(` with T a pointer to a wide vector type (cv and
    // a leading :: allowed): the checked cast of kernel.h. Returns the last token handled.
    size_t rewrite_vector_cast(size_t cast) {
        size_t close = cast + 2;
        int stars = 0, vectors = 0;
        std::string type;
        for (; close < t_.size() && !is(close, ">"); ++close) {
            if (is(close, "*"))
                ++stars;
            else if (t_[close].kind == tok_kind::ident && is_wide_vector(text(close)))
                ++vectors;
            else if (!is(close, "const") && !is(close, "volatile") && !is(close, "::"))
                return cast + 1; // anything else (a template, a reference): left alone
            type += (type.empty() || is(close, "*") ? "" : " ") + text(close);
        }
        if (close >= t_.size() || !is(close + 1, "(") || stars != 1 || vectors != 1 ||
            t_[cast].begin < copied_)
            return cast + 1;
        std::string kind = is(cast, "reinterpret_cast") ? "reinterpret" : "static";
        out_.append(s_, copied_, t_[cast].begin - copied_);
        out_ += "::cudasim::detail::vector_" + kind + "_cast<";
        out_.append(s_, t_[cast + 2].begin, t_[close].begin - t_[cast + 2].begin);
        out_ += ">(__FILE__, __LINE__, \"" + kind + "_cast<" + type + ">\", ";
        out_.append(count_newlines(t_[cast].begin, t_[close + 1].end), '\n');
        copied_ = t_[close + 1].end;
        return close + 1;
    }

    void rewrite_local_include(size_t lit) {
        std::string name = s_.substr(t_[lit].begin + 1, t_[lit].end - t_[lit].begin - 2);
        std::filesystem::path p = dir_ / name;
        std::error_code ec;
        if (name.empty() || !std::filesystem::is_regular_file(p, ec))
            return; // not next to the .cu: the include path finds it, as before
        p = std::filesystem::absolute(p).lexically_normal();
        out_.append(s_, copied_, t_[lit].begin - copied_);
        out_ += quote_path(launches_inside(p) ? rewritten_header(p).string() : p.string());
        copied_ = t_[lit].end;
    }

    // Does the header launch a kernel (or include one next to it that does)?
    static bool launches_inside(const std::filesystem::path &p) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream buf;
        buf << in.rdbuf();
        return buf.str().find("<<<") != std::string::npos;
    }

    // The header rewritten (once per run) into the session's folder; its path.
    std::filesystem::path rewritten_header(const std::filesystem::path &p) {
        auto &done = ses_.rewritten;
        size_t n = std::find(done.begin(), done.end(), p) - done.begin();
        std::filesystem::path out = ses_.header_dir / (std::to_string(n) + ".h");
        if (n == done.size()) {
            done.push_back(p);
            std::string text = rewrite_file(p, ses_);
            std::error_code ec;
            std::filesystem::create_directories(ses_.header_dir, ec);
            std::ofstream o(out, std::ios::binary);
            o << text;
        }
        return out;
    }

    size_t rewrite_extern_shared(size_t ext, bool block_scope) {
        size_t semi = ext;
        while (semi < t_.size() && !is(semi, ";"))
            ++semi;
        if (semi == t_.size())
            return ext + 1;
        std::string replacement;
        bool shape_ok = semi >= ext + 5 && is(semi - 1, "]") && is(semi - 2, "[") &&
                        t_[semi - 3].kind == tok_kind::ident;
        if (!block_scope) {
            replacement = "static_assert(false, \"cudasim: extern __shared__ arrays must be "
                          "declared inside a kernel or device function (the simulator does not "
                          "support them at file scope)\");";
        } else if (!shape_ok) {
            replacement = "static_assert(false, \"cudasim: unsupported extern __shared__ "
                          "declaration; use: extern __shared__ T name[];\");";
        } else {
            // The element type: the tokens between __shared__ and the name, minus alignment
            // attributes (the simulator's buffer is 128-byte aligned).
            std::string type;
            for (size_t j = ext + 2; j < semi - 3; ++j) {
                if (is(j, "__align__") || is(j, "alignas") || is(j, "__attribute__")) {
                    size_t open = j + 1;
                    int depth = 0;
                    for (j = open; j < semi - 3; ++j) {
                        depth += is(j, "(") - is(j, ")");
                        if (depth == 0)
                            break;
                    }
                    continue;
                }
                if (!type.empty())
                    type += ' ';
                type += text(j);
            }
            std::string name = text(semi - 3);
            replacement = type + " *" + name + " = reinterpret_cast<" + type +
                          " *>(::cudasim::dynamic_shared_memory());";
        }
        out_.append(s_, copied_, t_[ext].begin - copied_);
        out_ += replacement;
        out_.append(count_newlines(t_[ext].begin, t_[semi].end), '\n');
        copied_ = t_[semi].end;
        return semi;
    }

    // `__shared__ [attributes] T a[N]..., b[M]...;` in a function: each array inside a
    // cudasim::shared_array (kernel.h: in the checked build a guard after it, which memcheck
    // knows), named by a reference. Left alone (returns `sh`): scalars, initialisers, or anything
    // else this scanner does not take apart.
    size_t rewrite_static_shared(size_t sh) {
        size_t semi = sh + 1;
        int depth = 0;
        std::vector<size_t> commas; // top-level commas: declarator boundaries
        for (; semi < t_.size() && !(depth == 0 && is(semi, ";")); ++semi) {
            if (t_[semi].directive || is(semi, "{") || is(semi, "}") || is(semi, "<"))
                return sh;
            depth += (is(semi, "(") || is(semi, "[")) - (is(semi, ")") || is(semi, "]"));
            if (depth == 0 && is(semi, "="))
                return sh;
            if (depth == 0 && is(semi, ","))
                commas.push_back(semi);
        }
        if (semi == t_.size())
            return sh;
        // The first declarator's name: the identifier before the first top-level '['.
        size_t first = sh + 1;
        depth = 0;
        while (first < semi && !(depth == 0 && is(first, "["))) {
            depth += is(first, "(") - is(first, ")");
            ++first;
        }
        if (first == semi || first < sh + 3 || t_[first - 1].kind != tok_kind::ident)
            return sh;
        std::string attrs, type;
        for (size_t j = sh + 1; j < first - 1; ++j) {
            if (is(j, "__align__") || is(j, "alignas") || is(j, "__attribute__")) {
                size_t from = j;
                int d = 0;
                for (++j; j < first - 1; ++j) {
                    d += is(j, "(") - is(j, ")");
                    if (d == 0)
                        break;
                }
                for (size_t k = from; k <= j && k < first - 1; ++k)
                    attrs += text(k) + " ";
                continue;
            }
            type += text(j) + " ";
        }
        if (type.empty())
            return sh;
        // Every declarator: a name and one or more [..] (a scalar among them: left alone).
        std::string out;
        size_t from = first - 1;
        commas.push_back(semi);
        for (size_t end : commas) {
            if (t_[from].kind != tok_kind::ident || from + 1 >= end || !is(from + 1, "[") ||
                !is(end - 1, "]"))
                return sh;
            std::string dims, name = text(from), holder = name + "__cudasim_array";
            for (size_t j = from + 1; j < end; ++j)
                dims += text(j);
            out += "__shared__ " + attrs + "::cudasim::shared_array< " + type + dims + " > " +
                   holder + "; auto &" + name + " = ::cudasim::shared_array_ref(" + holder +
                   ", \"" + name + "\");" + (end == semi ? "" : " ");
            from = end + 1;
        }
        out_.append(s_, copied_, t_[sh].begin - copied_);
        out_ += out;
        out_.append(count_newlines(t_[sh].begin, t_[semi].end), '\n');
        copied_ = t_[semi].end;
        return semi;
    }

    const std::string &s_;
    std::vector<token> t_;
    std::filesystem::path dir_; // the .cu's directory
    session &ses_;
    std::string out_;
    size_t copied_ = 0; // source bytes before this index are already in out_
};

// The file rewritten: a #line directive first, so that diagnostics name the original.
std::string rewrite_file(const std::filesystem::path &path, session &ses) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string src = buf.str();
    return "#line 1 " + quote_path(path.string()) + "\n" +
           rewriter(src, path.parent_path(), ses).run();
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        std::fprintf(stderr, "usage: cudasim_rewrite <in.cu> <out.cpp> [<out.d>]\n");
        return 2;
    }
    namespace fs = std::filesystem;
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cudasim_rewrite: cannot read %s\n", argv[1]);
        return 1;
    }
    fs::path path = fs::absolute(argv[1]).lexically_normal();
    fs::path out_path(argv[2]);
    session ses{fs::absolute(out_path).lexically_normal().string() + ".h", {}};
    std::string out = "#include <cuda_runtime.h>\n" + rewrite_file(path, ses);

    std::error_code ec;
    if (out_path.has_parent_path())
        fs::create_directories(out_path.parent_path(), ec);
    std::ofstream o(out_path, std::ios::binary);
    o << out;
    if (!o.good()) {
        std::fprintf(stderr, "cudasim_rewrite: cannot write %s\n", argv[2]);
        return 1;
    }
    if (argc == 4) { // make-style: the output depends on the .cu and the rewritten headers
        std::ofstream d(argv[3], std::ios::binary);
        d << argv[2] << ":";
        for (const auto &h : ses.rewritten)
            d << " " << h.string();
        d << "\n";
        if (!d.good()) {
            std::fprintf(stderr, "cudasim_rewrite: cannot write %s\n", argv[3]);
            return 1;
        }
    }
    return 0;
}
