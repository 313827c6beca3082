//===- ProgramTest.cpp - Parsing and validating the program JSON ----------===//
#include "runner/Program.h"

#include "TestProgram.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <stdexcept>
#include <string>

namespace fsdp {
namespace driver {
namespace {

using nlohmann::json;

/// The parser's message for the tiny program (2 x 2 mesh) after `edit`.
std::string errorAfter(const std::function<void(json &)> &edit) {
  json j = test::programJson(test::testProgram(2, 2));
  edit(j);
  try {
    parseProgram(j.dump());
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Program, RoundTripsEveryField) {
  Program want = test::testProgram(2, 2);
  Program got = parseProgram(test::programJson(want).dump());
  EXPECT_EQ(got.model, "tiny");
  EXPECT_EQ(got.entry, "tiny_step");
  EXPECT_EQ(got.worldSize, 4);
  EXPECT_EQ(got.replicate, 2);
  EXPECT_EQ(got.shard, 2);
  EXPECT_EQ(got.optimizer, "adamw");
  EXPECT_EQ(got.persistentBytes, want.persistentBytes);
  EXPECT_EQ(got.arenaBytes, want.arenaBytes);
  EXPECT_EQ(got.report, want.report);
  ASSERT_EQ(got.units.size(), 2u);
  const UnitInfo &u = got.units[1];
  EXPECT_EQ(u.name, "h.0");
  EXPECT_EQ(u.flatNumel, 59);
  EXPECT_EQ(u.paddedNumel, 60);
  EXPECT_EQ(u.shardNumel, 30);
  EXPECT_EQ(u.offset, want.units[1].offset);
  ASSERT_EQ(u.params.size(), 3u);
  EXPECT_EQ(u.params[2].name, "h.0.conv.weight");
  EXPECT_EQ(u.params[2].shape, (std::vector<int64_t>{3, 2, 2, 2}));
  EXPECT_EQ(u.params[2].flatOffset, 35);
  EXPECT_EQ(u.params[0].init.kind, "kaiming_uniform");
  EXPECT_DOUBLE_EQ(u.params[0].init.args.at(0), std::sqrt(5.0));
  ASSERT_EQ(u.state.size(), 2u);
  EXPECT_EQ(u.state[1].name, "exp_avg_sq");
  EXPECT_EQ(u.state[1].offset, want.units[1].state[1].offset);
  ASSERT_EQ(got.buffers.size(), 3u);
  EXPECT_EQ(got.buffers[2].dtype, "i64");
  EXPECT_TRUE(got.buffers[2].shape.empty());
  ASSERT_EQ(got.inputs.size(), 2u);
  EXPECT_EQ(got.inputs[1].index, 1);
  EXPECT_EQ(got.inputs[1].maxId, 11);
  EXPECT_EQ(got.lossOffset, want.lossOffset);
  EXPECT_EQ(got.lossDtype, "f32");
  EXPECT_EQ(got.batchPerRank(), 2);
}

TEST(Program, RankLocalUnitIsWholeOnAShardedMesh) {
  Program want =
      test::testProgram(1, 2, "adamw", "tiny", /*rankLocalBlock=*/true);
  Program p = parseProgram(test::programJson(want).dump());
  EXPECT_FALSE(p.units[0].rankLocal);
  EXPECT_EQ(p.units[0].shardNumel * 2, p.units[0].paddedNumel);
  EXPECT_TRUE(p.units[1].rankLocal);
  EXPECT_EQ(p.units[1].shardNumel, 59);
  EXPECT_EQ(p.units[1].paddedNumel, 59);
  EXPECT_EQ(errorAfter([](json &j) { j["units"][1]["rank_local"] = 1; }),
            "program: units[1].rank_local: expected true or false");
  // A unit that is not rank-local must still be sharded.
  json j = test::programJson(want);
  j["units"][1]["rank_local"] = false;
  EXPECT_THROW(parseProgram(j.dump()), std::runtime_error);
}

TEST(Program, FrozenUnitSharesItsUnitsNameAndHasNoState) {
  // A unit's frozen flat parameter: the same unit name, no optimizer state.
  auto addFrozen = [](json &j) {
    json frozen = j["units"][1];
    frozen["frozen"] = true;
    frozen["state"] = json::array();
    for (json &p : frozen["params"])
      p["name"] = "frozen." + p["name"].get<std::string>();
    j["units"].push_back(frozen);
  };
  json j = test::programJson(test::testProgram(2, 2));
  addFrozen(j);
  Program p = parseProgram(j.dump());
  ASSERT_EQ(p.units.size(), 3u);
  EXPECT_FALSE(p.units[1].frozen);
  EXPECT_TRUE(p.units[2].frozen);
  EXPECT_EQ(p.units[2].name, p.units[1].name);
  EXPECT_EQ(errorAfter([&](json &j) {
              addFrozen(j);
              j["units"][2]["state"] = j["units"][1]["state"];
            }),
            "program: units[2].state: a frozen unit is never updated and has "
            "no optimizer state");
  EXPECT_EQ(errorAfter([&](json &j) {
              addFrozen(j);
              j["units"][2]["frozen"] = "yes";
            }),
            "program: units[2].frozen: expected true or false");
  EXPECT_EQ(errorAfter([&](json &j) {
              addFrozen(j);
              j["units"][2]["frozen"] = false;
              j["units"][2]["state"] = j["units"][1]["state"];
            }),
            "program: units[2].name: unit 'h.0' is also units[1]");
}

TEST(Program, OptionalScalarsAreCheckedWhereTheyAre) {
  Program plain =
      parseProgram(test::programJson(test::testProgram(2, 2)).dump());
  EXPECT_EQ(plain.gradNormOffset, -1);
  EXPECT_EQ(plain.foundInfOffset, -1);
  json j = test::programJson(test::testProgram(2, 2));
  j["grad_norm"] = {{"offset", 0}};
  j["loss_scale"] = {{"found_inf_offset", 4}};
  Program p = parseProgram(j.dump());
  EXPECT_EQ(p.gradNormOffset, 0);
  EXPECT_EQ(p.foundInfOffset, 4);
  EXPECT_EQ(errorAfter([](json &j) { j["grad_norm"] = 8; }),
            "program: grad_norm: expected an object {\"offset\"}");
  EXPECT_EQ(errorAfter([](json &j) { j["loss_scale"] = json::array(); }),
            "program: loss_scale: expected an object {\"found_inf_offset\"}");
  EXPECT_EQ(errorAfter([](json &j) {
              j["loss_scale"] = {{"found_inf_offset", -4}};
            }),
            "program: loss_scale.found_inf_offset: negative offset -4");
}

TEST(Program, PostForwardGroupDividesTheShardGroup) {
  EXPECT_EQ(
      parseProgram(test::programJson(test::testProgram(2, 2)).dump())
          .postForwardGroup,
      0);
  json j = test::programJson(test::testProgram(2, 2));
  j["post_forward_group"] = 2;
  EXPECT_EQ(parseProgram(j.dump()).postForwardGroup, 2);
  for (int group : {1, 3})
    EXPECT_EQ(errorAfter([&](json &j) { j["post_forward_group"] = group; }),
              "program: post_forward_group: must be > 1 and divide shard 2");
}

TEST(Program, WholeStateHasItsOwnNumel) {
  // Adafactor's factored second moment: not the shard's size, the same on
  // every rank.
  json j = test::programJson(test::testProgram(2, 2));
  j["units"][0]["state"][0]["whole"] = true;
  j["units"][0]["state"][0]["numel"] = 5;
  Program p = parseProgram(j.dump());
  EXPECT_TRUE(p.units[0].state[0].whole);
  EXPECT_EQ(p.units[0].state[0].numel, 5);
  EXPECT_FALSE(p.units[0].state[1].whole);
  EXPECT_EQ(p.units[0].state[1].numel, p.units[0].shardNumel);
  EXPECT_EQ(
      errorAfter([](json &j) { j["units"][0]["state"][0]["whole"] = true; }),
      "program: units[0].state[0].numel: missing");
  EXPECT_EQ(
      errorAfter([](json &j) { j["units"][0]["state"][0]["numel"] = 5; }),
      "program: units[0].state[0].numel: a sharded state has the "
      "shard's numel " +
          std::to_string(
              parseProgram(test::programJson(test::testProgram(2, 2)).dump())
                  .units[0]
                  .shardNumel));
}

TEST(Program, EvalProgramsFreezeEveryUnit) {
  EXPECT_EQ(
      parseProgram(test::programJson(test::testProgram(2, 2)).dump()).mode,
      "train");
  EXPECT_EQ(errorAfter([](json &j) { j["mode"] = "infer"; }),
            "program: mode: expected train or eval, got 'infer'");
  EXPECT_EQ(errorAfter([](json &j) { j["mode"] = "eval"; }),
            "program: units[0].frozen: an eval program updates no parameter: "
            "every unit is frozen");
  json j = test::programJson(test::testProgram(2, 2));
  j["mode"] = "eval";
  for (json &u : j["units"]) {
    u["frozen"] = true;
    u["state"] = json::array();
  }
  EXPECT_EQ(parseProgram(j.dump()).mode, "eval");
}

TEST(Program, NoShardKeepsTheWholeFlatParameter) {
  Program p = parseProgram(test::programJson(test::testProgram(3, 1)).dump());
  EXPECT_EQ(p.replicate, 3);
  EXPECT_EQ(p.units[0].shardNumel, p.units[0].paddedNumel);
}

TEST(Program, MissingAndIllTypedKeysNameTheirPath) {
  EXPECT_EQ(errorAfter([](json &j) { j.erase("entry"); }),
            "program: entry: missing");
  EXPECT_EQ(errorAfter([](json &j) { j["world_size"] = "4"; }),
            "program: world_size: expected an integer");
  EXPECT_EQ(errorAfter([](json &j) {
              j["units"][1]["params"][0]["shape"] = json::array({"5", 6});
            }),
            "program: units[1].params[0].shape: expected an array of integers");
  EXPECT_EQ(
      errorAfter([](json &j) { j["units"][0]["params"][1].erase("init"); }),
      "program: units[0].params[1].init: missing");
  EXPECT_EQ(errorAfter([](json &j) { j["inputs"][0]["max_id"] = 1.5; }),
            "program: inputs[0].max_id: expected an integer");
  EXPECT_EQ(errorAfter([](json &j) { j["loss"] = 3; }),
            "program: loss: expected an object {\"offset\", \"dtype\"}");
  EXPECT_EQ(errorAfter([](json &j) { j["buffers"] = json::object(); }),
            "program: buffers: expected an array of objects");
  EXPECT_NE(errorAfter([](json &) {}).find("no error"), std::string::npos);
}

TEST(Program, RejectsInvalidJson) {
  EXPECT_THROW(parseProgram("{\"model\": 1,"), std::runtime_error);
}

// The keys cannot drift between the compiler's writer, this parser and the
// tests' writer: all three spell them from ProgramKeys.def. Every required
// key of the table is read (removing it names it), and a key the table
// does not list is refused wherever it appears.
TEST(Program, EveryRequiredKeyOfTheTableIsRead) {
  namespace keys = fsdprt::program_keys;
  json whole = test::programJson(test::testProgram(2, 2));
  whole[keys::program_lr_schedule] = {{keys::lr_schedule_kind, "cosine"},
                                      {keys::lr_schedule_warmup_steps, 1},
                                      {keys::lr_schedule_decay_steps, 2},
                                      {keys::lr_schedule_min_lr_ratio, 0.1}};
  whole[keys::program_grad_norm] = {{keys::grad_norm_offset, 0}};
  whole[keys::program_loss_scale] = {{keys::loss_scale_found_inf_offset, 0}};
  ASSERT_NO_THROW(parseProgram(whole.dump()));
  // Where each object of the table sits in the tiny program.
  const std::map<std::string, json::json_pointer> where = {
      {"program", json::json_pointer("")},
      {"lr_schedule", json::json_pointer("/lr_schedule")},
      {"unit", json::json_pointer("/units/1")},
      {"param", json::json_pointer("/units/1/params/0")},
      {"init", json::json_pointer("/units/1/params/0/init")},
      {"state", json::json_pointer("/units/1/state/0")},
      {"buffer", json::json_pointer("/buffers/0")},
      {"input", json::json_pointer("/inputs/0")},
      {"loss", json::json_pointer("/loss")},
      {"grad_norm", json::json_pointer("/grad_norm")},
      {"loss_scale", json::json_pointer("/loss_scale")},
  };
  // An eval program for the outputs' keys.
  json eval = whole;
  eval[keys::program_mode] = "eval";
  for (json &u : eval[keys::program_units]) {
    u[keys::unit_frozen] = true;
    u[keys::unit_state] = json::array();
  }
  eval[keys::program_outputs] = json::array({{{keys::output_name, "logits"},
                                              {keys::output_micro_batch, 0},
                                              {keys::output_shape, {2, 4}},
                                              {keys::output_dtype, "f32"},
                                              {keys::output_offset, 0}}});
  ASSERT_NO_THROW(parseProgram(eval.dump()));
  int required = 0;
  for (const keys::Row &row : keys::kRows) {
    if (row.presence != keys::Presence::REQUIRED)
      continue;
    bool output = std::string(row.object) == "output";
    ASSERT_TRUE(output || where.count(row.object)) << row.object;
    json j = output ? eval : whole;
    j[output ? json::json_pointer("/outputs/0") : where.at(row.object)].erase(
        row.key);
    std::string error = "(no error)";
    try {
      parseProgram(j.dump());
    } catch (const std::runtime_error &e) {
      error = e.what();
    }
    EXPECT_NE(error.find(std::string(row.key) + ": missing"), std::string::npos)
        << row.object << "." << row.key << ": " << error;
    ++required;
  }
  EXPECT_GT(required, 40);
}

TEST(Program, KeysOutsideTheTableAreRefused) {
  EXPECT_EQ(errorAfter([](json &j) { j["version"] = 1; }),
            "program: version: unknown key (not in ProgramKeys.def for "
            "program)");
  EXPECT_EQ(errorAfter([](json &j) { j["units"][1]["strategy"] = "x"; }),
            "program: units[1].strategy: unknown key (not in ProgramKeys.def "
            "for unit)");
  EXPECT_EQ(errorAfter([](json &j) {
              j["units"][0]["params"][1]["init"]["seed"] = 1;
            }),
            "program: units[0].params[1].init.seed: unknown key (not in "
            "ProgramKeys.def for init)");
  EXPECT_EQ(errorAfter([](json &j) { j["loss"]["scale"] = 1; }),
            "program: loss.scale: unknown key (not in ProgramKeys.def for "
            "loss)");
}

TEST(Program, ChecksTheMeshAndShardSizes) {
  EXPECT_EQ(errorAfter([](json &j) { j["world_size"] = 8; }),
            "program: world_size: replicate 2 x shard 2 != world_size 8");
  EXPECT_EQ(errorAfter([](json &j) { j["units"][0]["padded_numel"] = 79; }),
            "program: units[0].padded_numel: 79 is not a multiple of shard 2");
  EXPECT_EQ(errorAfter([](json &j) { j["units"][0]["shard_numel"] = 40; }),
            "program: units[0].shard_numel: 40 x shard 2 != padded_numel 78");
  EXPECT_EQ(errorAfter([](json &j) { j["units"][1]["padded_numel"] = 58; }),
            "program: units[1].padded_numel: 58 is less than flat_numel 59");
  EXPECT_EQ(errorAfter([](json &j) { j["units"][1]["dtype"] = "bf16"; }),
            "program: units[1].dtype: master shards must be f32, got 'bf16'");
}

TEST(Program, ChecksParamsFitTheirFlatParameter) {
  EXPECT_EQ(errorAfter([](json &j) {
              j["units"][1]["params"][2]["flat_offset"] = 36;
            }),
            "program: units[1].params[2].flat_offset: 'h.0.conv.weight' (24 "
            "elements at 36) does not fit in flat_numel 59");
  EXPECT_EQ(
      errorAfter(
          [](json &j) { j["units"][1]["params"][1]["flat_offset"] = 29; }),
      "program: units[1].params: 'h.0.fc.weight' and 'h.0.fc.bias' overlap");
  EXPECT_EQ(errorAfter([](json &j) {
              j["units"][1]["params"][1]["name"] = "wte.weight";
            }),
            "program: units[1].params[1]: name 'wte.weight' is also used by "
            "units[0].params[0]");
  EXPECT_EQ(errorAfter([](json &j) {
              j["units"][0]["params"][0]["init"]["kind"] = "orthogonal";
            }),
            "program: units[0].params[0].init.kind: unknown initializer "
            "'orthogonal'");
  EXPECT_EQ(errorAfter([](json &j) {
              j["units"][0]["params"][0]["init"]["args"] = json::array({0.0});
            }),
            "program: units[0].params[0].init.args: normal takes 2 arguments, "
            "got 1");
}

TEST(Program, ChecksOffsetsAgainstThePersistentBuffer) {
  json j = test::programJson(test::testProgram(2, 2));
  int64_t size = j["persistent_bytes"];
  EXPECT_EQ(errorAfter([&](json &k) { k["units"][0]["offset"] = size - 8; }),
            "program: units[0].offset: bytes [" + std::to_string(size - 8) +
                ", " + std::to_string(size - 8 + 156) +
                ") exceed persistent_bytes " + std::to_string(size));
  EXPECT_EQ(
      errorAfter([](json &k) { k["units"][1]["state"][0]["offset"] = -4; }),
      "program: units[1].state[0].offset: negative offset -4");
  EXPECT_NE(errorAfter([&](json &k) {
              k["buffers"][2]["offset"] = size - 4;
            }).find("program: buffers[2].offset: bytes"),
            std::string::npos);
  EXPECT_NE(errorAfter([&](json &k) {
              k["loss"]["offset"] = size;
            }).find("program: loss.offset: bytes"),
            std::string::npos);
  EXPECT_EQ(errorAfter([](json &k) { k["arena_bytes"] = 0; }).substr(0, 26),
            "program: arena_bytes: 0 ca");
}

// CPU offload: shards and state are in the host buffer, checked against
// host_bytes; the runner sees them past the persistent bytes of its image,
// and locate() sends them back to the host buffer.
TEST(Program, OffloadedShardsLiveInTheHostBuffer) {
  json j = test::programJson(test::testProgram(2, 2));
  int64_t persistent = j["persistent_bytes"];
  int64_t unitOffset = j["units"][1]["offset"];
  j["cpu_offload"] = true;
  j["host_bytes"] = persistent;
  Program p = parseProgram(j.dump());
  EXPECT_TRUE(p.cpuOffload);
  EXPECT_EQ(p.imageBytes(), 2 * persistent);
  EXPECT_EQ(p.units[1].offset, persistent + unitOffset);
  BufferRef at = locate(p, {7, 9}, p.units[1].offset);
  EXPECT_EQ(at.buffer, 9);
  EXPECT_EQ(at.offset, unitOffset);
  at = locate(p, {7, 9}, p.lossOffset);
  EXPECT_EQ(at.buffer, 7);
  EXPECT_EQ(at.offset, p.lossOffset);

  EXPECT_EQ(errorAfter([](json &k) {
              k["cpu_offload"] = true;
              k["host_bytes"] = 64;
            }),
            "program: units[0].offset: bytes [0, 156) exceed host_bytes 64");
  EXPECT_EQ(errorAfter([](json &k) {
              k["cpu_offload"] = true;
              k["host_bytes"] = 0;
            }),
            "program: host_bytes: a program offloading to the CPU needs a "
            "positive host buffer, got 0");
}

TEST(Program, ChecksTheInputs) {
  EXPECT_EQ(errorAfter([](json &j) { j["inputs"][1]["micro_batch"] = 1; }),
            "program: inputs[1].micro_batch: 1 is not in [0, micro_batches 1)");
  EXPECT_EQ(errorAfter([](json &j) { j["inputs"][1]["index"] = 0; }),
            "program: inputs[1]: input 0 of micro-batch 0 appears twice");
  EXPECT_EQ(errorAfter([](json &j) { j["inputs"][1]["dtype"] = "u8"; }),
            "program: inputs[1].dtype: unknown dtype 'u8'");
  EXPECT_EQ(errorAfter([](json &j) {
              j["inputs"][1]["shape"] = json::array({1, 4});
            }),
            "program: inputs[1].shape: batch size 1 differs from 2 of "
            "inputs[0]");
  EXPECT_EQ(errorAfter([](json &j) { j["micro_batches"] = 2; }),
            "program: inputs: input 0 is given for 1 of 2 micro-batches");
}

} // namespace
} // namespace driver
} // namespace fsdp
