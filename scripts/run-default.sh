#!/usr/bin/env bash
# README command (1): install dependencies, build the CLI (only: the tests are not even
# configured), prepare the default corpus (German->English sentence pairs from the Ding
# dictionary), train the default translator for about 13 minutes, score it on the held-out test
# set, and translate a few sentences.
#
# Outputs: data/de-en/{train,valid,test}.tsv and the run directory runs/de-en (config.toml,
# tokenizers, checkpoint.safetensors, best.safetensors, ema.safetensors, train.log, metrics.jsonl,
# curves.svg, report.html).
# Running it again resumes the run where it stopped (and then only evaluates, if it finished).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh --target rosetta_exe -DROSETTA_BUILD_TESTS=OFF
bash scripts/prepare-corpus.sh data/de-en

run=runs/de-en
if [ -f "$run/checkpoint.safetensors" ]; then
  build/rosetta train --resume "$run"
else
  # --recipe auto (docs/cli.md#recipes): the model, batch and regularization follow the passes
  # over Ding's 18k pairs that 13 minutes give on this machine, timed before the run (more
  # passes, stronger regularization); best.safetensors is kept by validation BLEU. The matrix
  # products run in bf16 where the CPU runs bf16 fast (AVX512_BF16 at 1.5x fp32's multiply-add
  # rate or more, or AMX), else in fp32 (docs/performance.md#precision).
  build/rosetta train --train data/de-en/train.tsv --valid data/de-en/valid.tsv --out "$run" \
    --max-time "${ROSETTA_TRAIN_TIME:-13m}" --recipe auto --precision auto
fi
build/rosetta plot --run "$run" --out "$run/curves.svg"
echo "== test set (beam 4):"
build/rosetta eval --model "$run" --test data/de-en/test.tsv --beam 4 --output "$run/test.hyp.txt"
build/rosetta report "$run" --out "$run/report.html"  # curves, translations, attention, test scores
echo "== report: open $run/report.html in a browser"
echo "== translations:"
printf '%s\n' "Ich habe heute keine Zeit." "Das Wetter ist schön." "Wo ist der Bahnhof?" \
  "Er hat das Buch gestern gelesen." "Kannst du mir bitte helfen?" |
  build/rosetta translate --model "$run" --beam 4 --attention "$run/attention.svg" |
  paste -d '\n' <(printf '%s\n' "Ich habe heute keine Zeit." "Das Wetter ist schön." "Wo ist der Bahnhof?" \
    "Er hat das Buch gestern gelesen." "Kannst du mir bitte helfen?" | sed 's/^/  de: /') <(sed 's/^/  en: /')
