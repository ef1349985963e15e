// rosetta export: a trained run's model in another engine's format (translator/export.h).
//
//   rosetta export [--format ctranslate2] [--checkpoint best] [--quantization float32] RUN OUT
#include "commands.h"
#include "decode_args.h"
#include "layers.h"
#include "log.h"
#include "rosetta/translator/export.h"

namespace rosetta::cli {

namespace {
struct ExportArgs {
  std::string format = "ctranslate2", checkpoint = "best", quantization = "float32", run, out;
};
}  // namespace

void register_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "write a run's model for another engine (CTranslate2)");
  cmd->add_option("run", a->run, "run directory made by rosetta train")->required();
  cmd->add_option("out", a->out, "the model directory to write: new, or an empty directory")->required();
  cmd->add_option("--format", a->format, "the engine: ctranslate2 (a CTranslate2 4.x model directory)")
      ->check(CLI::IsMember({"ctranslate2"}))->capture_default_str();
  cmd->add_option("--checkpoint", a->checkpoint, kCheckpointHelp)->check(CLI::IsMember(kCheckpointChoices))
      ->capture_default_str();
  cmd->add_option("--quantization", a->quantization,
                  "weights kept as float32, or int8 (per row, as CTranslate2's converters quantize)")
      ->check(CLI::IsMember({"float32", "int8"}))->capture_default_str();
  cmd->callback([a] {
    const Translator t = Translator::load(a->run, a->checkpoint);
    export_ctranslate2(t, a->out, a->quantization == "int8" ? Ct2Quantization::int8 : Ct2Quantization::float32);
    spdlog::info("wrote {}: {} as a CTranslate2 model ({})", a->out, t.weights_path, a->quantization);
  });
}

}  // namespace rosetta::cli
