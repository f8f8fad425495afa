// A tiny reader for the pickles memviz/pickle_writer.h writes, for tests: it renders the value as
// Python would print it ({'k': [1, 'x', None, True]}), and fails on any opcode outside Note [Pickle
// opcodes], so a test also proves the writer kept to the set memory_viz understands.
//
//   EXPECT_EQ(testing::RenderPickle(Pickle(value)), "{'a': 1}");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace oomguard::testing {

// Throws std::runtime_error on anything it does not understand.
inline std::string RenderPickle(const std::string& bytes) {
  // Each stack item is its rendering; lists and dicts stay open ("[1, 2" / "{'a': 1") until used.
  struct Item {
    std::string text;
    char kind = 0;  // '[' or '{' while still a container, 0 otherwise
    bool empty = true;
  };
  std::vector<std::shared_ptr<Item>> stack;
  std::vector<size_t> marks;
  std::map<uint32_t, std::shared_ptr<Item>> memo;
  size_t at = 0;
  auto byte = [&]() -> uint8_t {
    if (at >= bytes.size()) throw std::runtime_error("truncated pickle");
    return static_cast<uint8_t>(bytes[at++]);
  };
  auto little = [&](int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{byte()} << (8 * i);
    return v;
  };
  auto close = [](const Item& item) { return item.kind ? item.text + (item.kind == '[' ? "]" : "}") : item.text; };
  auto push = [&](std::string text) { stack.push_back(std::make_shared<Item>(Item{std::move(text)})); };
  auto pop_to_mark = [&]() {
    if (marks.empty()) throw std::runtime_error("no mark");
    std::vector<std::shared_ptr<Item>> items(stack.begin() + static_cast<long>(marks.back()), stack.end());
    stack.resize(marks.back());
    marks.pop_back();
    if (stack.empty()) throw std::runtime_error("no container");
    return items;
  };
  if (byte() != 0x80 || byte() != 2) throw std::runtime_error("not protocol 2");
  while (true) {
    const uint8_t op = byte();
    switch (op) {
      case 'N':
        push("None");
        break;
      case 0x88:
        push("True");
        break;
      case 0x89:
        push("False");
        break;
      case 'K':
        push(std::to_string(little(1)));
        break;
      case 'M':
        push(std::to_string(little(2)));
        break;
      case 'J':
        push(std::to_string(static_cast<int32_t>(little(4))));
        break;
      case 0x8a: {
        const int n = byte();
        if (n < 1 || n > 8) throw std::runtime_error("LONG1 wider than 8 bytes");
        uint64_t v = little(n);
        if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        push(std::to_string(static_cast<int64_t>(v)));
        break;
      }
      case 'X': {
        const auto n = static_cast<size_t>(little(4));
        if (at + n > bytes.size()) throw std::runtime_error("truncated string");
        // Appended, not "'" + substr: GCC 12 warns (-Wstringop-overflow) on operator+(const char*,
        // string&&), whose insert at 0 it cannot bound; a false positive (GCC's meta-bug PR 88443).
        std::string quoted(1, '\'');
        quoted.append(bytes, at, n).push_back('\'');
        push(std::move(quoted));
        at += n;
        break;
      }
      case ']':
        stack.push_back(std::make_shared<Item>(Item{"[", '['}));
        break;
      case '}':
        stack.push_back(std::make_shared<Item>(Item{"{", '{'}));
        break;
      case '(':
        marks.push_back(stack.size());
        break;
      case 'e':
      case 'u': {
        const auto items = pop_to_mark();
        Item& container = *stack.back();
        if (container.kind != (op == 'e' ? '[' : '{')) throw std::runtime_error("APPENDS/SETITEMS on the wrong kind");
        if (op == 'u' && items.size() % 2 != 0) throw std::runtime_error("odd SETITEMS");
        for (size_t i = 0; i < items.size(); i += (op == 'e' ? 1 : 2)) {
          container.text += (container.empty ? "" : ", ") + close(*items[i]);
          if (op == 'u') container.text += ": " + close(*items[i + 1]);
          container.empty = false;
        }
        break;
      }
      case 'q':
        memo[byte()] = stack.at(stack.size() - 1);
        break;
      case 'r':
        memo[static_cast<uint32_t>(little(4))] = stack.at(stack.size() - 1);
        break;
      case 'h':
        stack.push_back(memo.at(byte()));
        break;
      case 'j':
        stack.push_back(memo.at(static_cast<uint32_t>(little(4))));
        break;
      case '.':
        if (stack.size() != 1 || !marks.empty() || at != bytes.size()) throw std::runtime_error("bad STOP");
        return close(*stack.back());
      default:
        throw std::runtime_error("opcode outside the memory_viz set: " + std::to_string(op));
    }
  }
}

}  // namespace oomguard::testing
