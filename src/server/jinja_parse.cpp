// Lexer and recursive-descent parser for the Jinja subset (see jinja.h).
// Operator precedence follows Jinja2's parser, lowest first: conditional,
// or, and, not, comparisons (incl. in), ~, + -, * / // %, **, unary -, and
// then postfix (. [] ()) with filters and "is" tests binding tightest.
#include <cctype>
#include <charconv>

#include "server/jinja_ast.h"

namespace llmserve::server::jinja {

namespace {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok kind;
  std::string text;
  int line;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : s_(src) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t open = find_open(pos_);
      std::string text(s_.substr(pos_, open - pos_));
      const bool at_tag = open < s_.size();
      const char kind = at_tag ? s_[open + 1] : 0;
      const bool strip_left = at_tag && open + 2 < s_.size() && s_[open + 2] == '-';
      const bool keep_left = at_tag && open + 2 < s_.size() && s_[open + 2] == '+';
      if (strip_left) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (at_tag && kind != '{' && !keep_left) {
        lstrip_block(text);
      }
      if (trim_next_newline_) {
        if (text.starts_with("\r\n")) text.erase(0, 2);
        else if (text.starts_with("\n")) text.erase(0, 1);
        trim_next_newline_ = false;
      }
      if (strip_next_) {
        size_t i = 0;
        while (i < text.size() && is_space(text[i])) ++i;
        text.erase(0, i);
        strip_next_ = false;
      }
      if (!text.empty()) out_.push_back({Tok::Text, std::move(text), line_});
      count_lines(pos_, open);
      if (!at_tag) break;
      pos_ = open + 2 + (strip_left || keep_left ? 1 : 0);
      if (kind == '#') comment();
      else tag(kind);
    }
    out_.push_back({Tok::End, "", line_});
    return std::move(out_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i)
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return s_.size();
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < s_.size(); ++i) line_ += s_[i] == '\n';
  }

  // lstrip_blocks: spaces and tabs between a line start and a block tag go.
  static void lstrip_block(std::string& text) {
    size_t i = text.size();
    while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t')) --i;
    if (i == 0 || text[i - 1] == '\n') text.resize(i);
  }

  void comment() {
    const size_t close = s_.find("#}", pos_);
    if (close == std::string_view::npos) fail(line_, "unclosed comment");
    count_lines(pos_, close);
    strip_next_ = close > pos_ && s_[close - 1] == '-';
    trim_next_newline_ = !strip_next_;
    pos_ = close + 2;
  }

  void tag(char kind) {
    const char close_char = kind == '{' ? '}' : '%';
    out_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line_});
    for (;;) {
      while (pos_ < s_.size() && is_space(s_[pos_])) line_ += s_[pos_++] == '\n';
      if (pos_ >= s_.size()) fail(line_, "unclosed tag");
      const char c = s_[pos_];
      const bool dash_close = c == '-' && pos_ + 2 < s_.size() && s_[pos_ + 1] == close_char && s_[pos_ + 2] == '}';
      if (dash_close || (c == close_char && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}')) {
        pos_ += dash_close ? 3 : 2;
        strip_next_ = dash_close;
        trim_next_newline_ = kind == '%' && !dash_close;
        out_.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", line_});
        return;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') name();
      else if (std::isdigit(static_cast<unsigned char>(c))) number();
      else if (c == '\'' || c == '"') string(c);
      else op();
    }
  }

  void name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    out_.push_back({Tok::Name, std::string(s_.substr(start, pos_ - start)), line_});
  }

  void number() {
    const size_t start = pos_;
    bool is_float = false;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    std::string text;
    for (char c : s_.substr(start, pos_ - start))
      if (c != '_') text += c;
    out_.push_back({is_float ? Tok::Float : Tok::Int, std::move(text), line_});
  }

  void string(char quote) {
    std::string v;
    ++pos_;
    for (;;) {
      if (pos_ >= s_.size()) fail(line_, "unterminated string literal");
      char c = s_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c == '\\' && pos_ < s_.size()) {
        const char e = s_[pos_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case '\\': case '\'': case '"': c = e; break;
          default: v += '\\'; c = e;  // Python keeps unknown escapes as written
        }
      }
      v += c;
    }
    out_.push_back({Tok::String, std::move(v), line_});
  }

  void op() {
    static constexpr std::string_view two[] = {"==", "!=", "<=", ">=", "//", "**"};
    for (std::string_view t : two)
      if (s_.substr(pos_, 2) == t) {
        out_.push_back({Tok::Op, std::string(t), line_});
        pos_ += 2;
        return;
      }
    const char c = s_[pos_];
    if (std::string_view("()[]{}.,:|~+-*/%<>=").find(c) == std::string_view::npos)
      fail(line_, std::string("unexpected character '") + c + "' in tag");
    out_.push_back({Tok::Op, std::string(1, c), line_});
    ++pos_;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool strip_next_ = false;
  bool trim_next_newline_ = false;
  std::vector<Token> out_;
};

std::unique_ptr<Node> make_node(Node::Kind kind, int line, std::string text = {}) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  n->text = std::move(text);
  return n;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  std::unique_ptr<Node> run() {
    auto root = make_node(Node::Kind::Root, 1);
    std::string stop = parse_body(root->body, {});
    if (!stop.empty()) fail(peek().line, "unexpected '" + stop + "'");
    return root;
  }

 private:
  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) fail(p_.peek().line, "template nested too deeply");
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  Token next() {
    Token t = peek();
    if (i_ < t_.size() - 1) ++i_;
    return t;
  }
  bool at_op(std::string_view op) const { return peek().kind == Tok::Op && peek().text == op; }
  bool at_name(std::string_view n) const { return peek().kind == Tok::Name && peek().text == n; }
  bool take_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool take_name(std::string_view n) {
    if (!at_name(n)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!take_op(op)) fail(peek().line, "expected '" + std::string(op) + "', got '" + peek().text + "'");
  }
  void expect(Tok kind, const char* what) {
    if (peek().kind != kind) fail(peek().line, std::string("expected ") + what);
    next();
  }
  std::string expect_name() {
    if (peek().kind != Tok::Name) fail(peek().line, "expected a name, got '" + peek().text + "'");
    return next().text;
  }

  // Parses nodes until a block tag whose keyword is in `stops` (returned,
  // with the BlockBegin and keyword consumed) or the end of input ("").
  std::string parse_body(NodeList& out, std::initializer_list<std::string_view> stops) {
    Depth d(*this);
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::End) return "";
      if (t.kind == Tok::Text) {
        out.push_back(make_node(Node::Kind::Text, t.line, t.text));
        next();
      } else if (t.kind == Tok::VarBegin) {
        next();
        auto n = make_node(Node::Kind::Output, t.line);
        n->expr = expression();
        expect(Tok::VarEnd, "'}}'");
        out.push_back(std::move(n));
      } else if (t.kind == Tok::BlockBegin) {
        const std::string kw = peek(1).text;
        for (std::string_view s : stops)
          if (kw == s && peek(1).kind == Tok::Name) {
            next();
            next();
            return kw;
          }
        next();
        out.push_back(statement());
      } else {
        fail(t.line, "unexpected '" + t.text + "'");
      }
    }
  }

  std::unique_ptr<Node> statement() {
    const int line = peek().line;
    const std::string kw = expect_name();
    if (kw == "if") return if_statement(line);
    if (kw == "for") return for_statement(line);
    if (kw == "set") return set_statement(line);
    fail(line, "unsupported tag '" + kw + "'");
  }

  std::unique_ptr<Node> if_statement(int line) {
    auto n = make_node(Node::Kind::If, line);
    ExprPtr cond = expression();
    for (;;) {
      expect(Tok::BlockEnd, "'%}'");
      NodeList body;
      const std::string stop = parse_body(body, {"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      if (stop == "elif") {
        cond = expression();
      } else if (stop == "else") {
        expect(Tok::BlockEnd, "'%}'");
        NodeList else_body;
        if (parse_body(else_body, {"endif"}) != "endif") fail(line, "missing endif");
        n->branches.emplace_back(nullptr, std::move(else_body));
        break;
      } else if (stop == "endif") {
        break;
      } else {
        fail(line, "missing endif");
      }
    }
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  std::unique_ptr<Node> for_statement(int line) {
    auto n = make_node(Node::Kind::For, line);
    n->targets.push_back(expect_name());
    while (take_op(",")) n->targets.push_back(expect_name());
    if (!take_name("in")) fail(line, "expected 'in' in for");
    n->expr = conditional_free_or();
    if (take_name("if")) n->filter = conditional_free_or();
    expect(Tok::BlockEnd, "'%}'");
    std::string stop = parse_body(n->body, {"else", "endfor"});
    if (stop == "else") {
      expect(Tok::BlockEnd, "'%}'");
      stop = parse_body(n->else_body, {"endfor"});
    }
    if (stop != "endfor") fail(line, "missing endfor");
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  std::unique_ptr<Node> set_statement(int line) {
    auto n = make_node(Node::Kind::Set, line);
    n->targets.push_back(expect_name());
    if (take_op(".")) {
      n->attr = expect_name();
    } else {
      while (take_op(",")) n->targets.push_back(expect_name());
    }
    if (!take_op("=")) {
      if (!n->attr.empty() || n->targets.size() != 1) fail(line, "expected '=' in set");
      n->kind = Node::Kind::SetBlock;
      expect(Tok::BlockEnd, "'%}'");
      if (parse_body(n->body, {"endset"}) != "endset") fail(line, "missing endset");
      expect(Tok::BlockEnd, "'%}'");
      return n;
    }
    n->expr = expression();
    expect(Tok::BlockEnd, "'%}'");
    return n;
  }

  ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::Binary, a->line, std::move(op));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr expression() {
    Depth d(*this);
    ExprPtr e = conditional_free_or();
    while (at_name("if")) {
      next();
      auto c = make(Expr::Kind::Conditional, e->line);
      c->args.push_back(std::move(e));
      c->args.push_back(conditional_free_or());
      c->args.push_back(take_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr conditional_free_or() {
    ExprPtr e = and_expr();
    while (take_name("or")) e = binary("or", std::move(e), and_expr());
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (take_name("and")) e = binary("and", std::move(e), not_expr());
    return e;
  }
  ExprPtr not_expr() {
    Depth d(*this);
    if (at_name("not")) {
      auto e = make(Expr::Kind::Unary, next().line, "not");
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = concat();
    for (;;) {
      if (peek().kind == Tok::Op &&
          (at_op("==") || at_op("!=") || at_op("<") || at_op("<=") || at_op(">") || at_op(">="))) {
        std::string op = next().text;
        e = binary(op, std::move(e), concat());
      } else if (take_name("in")) {
        e = binary("in", std::move(e), concat());
      } else if (at_name("not") && peek(1).kind == Tok::Name && peek(1).text == "in") {
        next();
        next();
        e = binary("not in", std::move(e), concat());
      } else {
        return e;
      }
    }
  }
  ExprPtr concat() {
    ExprPtr e = additive();
    while (take_op("~")) e = binary("~", std::move(e), additive());
    return e;
  }
  ExprPtr additive() {
    ExprPtr e = multiplicative();
    while (at_op("+") || at_op("-")) {
      std::string op = next().text;
      e = binary(op, std::move(e), multiplicative());
    }
    return e;
  }
  ExprPtr multiplicative() {
    ExprPtr e = power();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      std::string op = next().text;
      e = binary(op, std::move(e), power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (take_op("**")) e = binary("**", std::move(e), unary());
    return e;
  }
  ExprPtr unary() {
    Depth d(*this);
    if (at_op("-") || at_op("+")) {
      auto e = make(Expr::Kind::Unary, peek().line, next().text);
      e->args.push_back(unary());
      return e;
    }
    return filters(postfix(primary()));
  }

  ExprPtr primary() {
    Depth d(*this);
    const Token t = next();
    switch (t.kind) {
      case Tok::String: {
        std::string s = t.text;
        while (peek().kind == Tok::String) s += next().text;  // adjacent literals concatenate
        auto e = make(Expr::Kind::Literal, t.line);
        e->value = s;
        return e;
      }
      case Tok::Int:
      case Tok::Float: {
        auto e = make(Expr::Kind::Literal, t.line);
        if (t.kind == Tok::Int) {
          int64_t v = 0;
          const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
          if (r.ec != std::errc()) fail(t.line, "integer literal out of range: " + t.text);
          e->value = v;
        } else {
          e->value = std::stod(t.text);
        }
        return e;
      }
      case Tok::Name: {
        auto e = make(Expr::Kind::Literal, t.line);
        if (t.text == "true" || t.text == "True") e->value = true;
        else if (t.text == "false" || t.text == "False") e->value = false;
        else if (t.text == "none" || t.text == "None") e->value = nullptr;
        else e = make(Expr::Kind::Name, t.line, t.text);
        return e;
      }
      case Tok::Op:
        if (t.text == "(") {
          ExprPtr e = expression();
          if (at_op(",")) {  // a tuple: treated as a list
            auto l = make(Expr::Kind::List, t.line);
            l->args.push_back(std::move(e));
            while (take_op(",") && !at_op(")")) l->args.push_back(expression());
            e = std::move(l);
          }
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto e = make(Expr::Kind::List, t.line);
          while (!at_op("]")) {
            e->args.push_back(expression());
            if (!take_op(",")) break;
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          auto e = make(Expr::Kind::Dict, t.line);
          while (!at_op("}")) {
            e->args.push_back(expression());
            expect_op(":");
            e->args.push_back(expression());
            if (!take_op(",")) break;
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail(t.line, t.kind == Tok::End ? "unexpected end of template" : "unexpected '" + t.text + "'");
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (take_op(".")) {
        auto a = make(Expr::Kind::Attr, e->line, expect_name());
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (at_op("[")) {
        e = subscript(std::move(e));
      } else if (at_op("(")) {
        auto c = make(Expr::Kind::Call, e->line);
        c->args.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr e) {
    Depth d(*this);
    const int line = next().line;  // '['
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (at_op("]")) break;
      if (take_op(":")) {
        if (++colons > 2) fail(line, "too many ':' in slice");
        continue;
      }
      if (parts[colons]) fail(line, "expected ':' or ']'");
      parts[colons] = expression();
    }
    expect_op("]");
    if (colons == 0) {
      if (!parts[0]) fail(line, "empty subscript");
      auto i = make(Expr::Kind::Index, line);
      i->args.push_back(std::move(e));
      i->args.push_back(std::move(parts[0]));
      return i;
    }
    auto s = make(Expr::Kind::Slice, line);
    s->args.push_back(std::move(e));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // "(" [arg {"," arg}] ")" where arg is expression or name=expression.
  void call_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().kind == Tok::Name && peek(1).kind == Tok::Op && peek(1).text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) fail(peek().line, "positional argument after keyword argument");
        e.args.push_back(expression());
      }
      if (!take_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (take_op("|")) {
        auto f = make(Expr::Kind::Filter, e->line, expect_name());
        f->args.push_back(std::move(e));
        if (at_op("(")) call_args(*f);
        e = std::move(f);
      } else if (at_name("is")) {
        next();
        auto t = make(Expr::Kind::Test, e->line);
        t->negated = take_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (at_op("(")) {
          call_args(*t);
        } else if (peek().kind == Tok::String || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                   (peek().kind == Tok::Name && !at_name("and") && !at_name("or") && !at_name("else") &&
                    !at_name("if") && !at_name("in") && !at_name("not") && !at_name("is"))) {
          t->args.push_back(primary());  // "is divisibleby 3", "is sameas false"
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::unique_ptr<Node> parse(std::string_view source) { return Parser(Lexer(source).run()).run(); }

}  // namespace llmserve::server::jinja
