#include <nlohmann/json.hpp>

#include "allocators/cards.h"
#include "base/byte_size.h"
#include "base/exit_codes.h"
#include "base/json_text.h"
#include "cli/command.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

int ListCards(bool with_sources, std::ostream& out) {
  out << PadRight("card", 12) << PadRight("name", 32) << PadRight("reported", 12) << PadRight("context", 13)
      << "cap (usable)\n";
  for (const CardPreset& card : AllCards()) {
    out << PadRight(std::string(card.key), 12) << PadRight(std::string(card.display_name), 32)
        << PadRight(FormatBytes(card.total_bytes), 12) << PadRight(FormatBytes(card.context_bytes), 13)
        << FormatBytes(card.allocator_cap_bytes()) << "\n";
    if (with_sources) out << "    source: " << card.source << "\n";
  }
  out << "\nreported: the total CUDA reports (torch.cuda.get_device_properties().total_memory);\n"
         "cap: what oomguard lets tensors hold, the reported total minus the modelled CUDA context.\n";
  return kExitOk;
}

// The presets as JSON, exact bytes: what scripts read (the CTest module's card table is checked
// against it, tests/package/card_table_check.cmake).
int ListCardsJson(std::ostream& out) {
  nlohmann::ordered_json cards = nlohmann::ordered_json::array();
  for (const CardPreset& card : AllCards()) {
    cards.push_back({{"key", card.key},
                     {"name", card.display_name},
                     {"total_bytes", card.total_bytes},
                     {"context_bytes", card.context_bytes},
                     {"cap_bytes", card.allocator_cap_bytes()}});
  }
  out << DumpJson(cards, 2) << "\n";
  return kExitOk;
}

class CardsCommand : public Command {
 public:
  CLI::App* Add(CLI::App& app) override {
    CLI::App* cards = app.add_subcommand("cards", "List the card presets --card accepts");
    cards->add_flag("--sources", with_sources_, "Show where each card's capacity comes from");
    cards->add_flag("--json", json_, "Print the presets as JSON, in bytes")->excludes("--sources");
    return cards;
  }
  int Run(const std::string&, std::ostream& out, std::ostream&) override {
    return json_ ? ListCardsJson(out) : ListCards(with_sources_, out);
  }

 private:
  bool with_sources_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> MakeCardsCommand() { return std::make_unique<CardsCommand>(); }

}  // namespace oomguard
