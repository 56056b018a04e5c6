package dev.tflkit.protocol;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Tests of the protocol module against the shared fixtures (no test framework needed: run with
 * {@code java dev.tflkit.protocol.ProtocolTests FIXTURES OUT}). Writes what it read back into OUT
 * so the Python side can check the JVM's files too ({@code tests/test_harness_jvm.py}).
 */
public final class ProtocolTests {
  private static int checks = 0;

  private static void check(boolean ok, String what) {
    checks++;
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  private interface Failing {
    void run() throws Exception;
  }

  private static void expectProtocolError(Failing body, String fragment) throws Exception {
    try {
      body.run();
    } catch (ProtocolException e) {
      check(e.getMessage().contains(fragment), "message '" + e.getMessage() + "' lacks " + fragment);
      return;
    }
    throw new AssertionError("expected a ProtocolException mentioning " + fragment);
  }

  private static List<Path> children(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.filter(Files::isDirectory).sorted().collect(Collectors.toList());
    }
  }

  static void jobs(Path fixtures, Path out) throws Exception {
    Map<String, List<List<Tensor>>> byJob = new LinkedHashMap<>();
    for (Path dir : children(fixtures.resolve("jobs"))) {
      Job job = Job.read(dir);
      check(job.id.startsWith("fixture-"), "job id " + job.id);
      List<List<Tensor>> sets = new ArrayList<>();
      for (int s = 0; s < job.inputSets.size(); s++) {
        List<Tensor> inputs = job.inputs(s);
        for (int k = 0; k < inputs.size(); k++) {
          Tensor t = inputs.get(k);
          Job.Entry e = job.inputSets.get(s).get(k);
          check(t.name.equals(e.name) && t.dtype == e.dtype, "entry " + e.file);
          if (e.file.endsWith(".npy")) {
            byte[] original = Files.readAllBytes(dir.resolve(e.file));
            check(Arrays.equals(Npy.encode(t), original), "byte-identical .npy " + e.file);
          }
          Npy.write(out.resolve("jobs").resolve(dir.getFileName()).resolve(s + "/" + k + ".npy"), t);
        }
        sets.add(inputs);
      }
      byJob.put(dir.getFileName().toString(), sets);
    }
    List<List<Tensor>> npy = byJob.get("all_dtypes_npy");
    List<List<Tensor>> raw = byJob.get("all_dtypes_raw");
    check(npy != null && raw != null && npy.size() == raw.size(), "both all_dtypes jobs");
    java.util.Set<DType> seen = java.util.EnumSet.noneOf(DType.class);
    for (int s = 0; s < npy.size(); s++) {
      for (int k = 0; k < npy.get(s).size(); k++) {
        check(npy.get(s).get(k).sameContent(raw.get(s).get(k)), "npy == raw, set " + s + " #" + k);
        seen.add(npy.get(s).get(k).dtype);
      }
    }
    check(seen.size() == DType.values().length, "every dtype covered: " + seen);
    Job add = Job.read(fixtures.resolve("jobs/add"));
    check("add".equals(add.signature) && add.threads == 2 && add.timedRuns == 3, "add job fields");
    check(add.backends.equals(Arrays.asList("cpu", "gpu_fp32")), "add backends");
    float[] a = add.inputs(0).get(0).toFloatArray();
    check(a.length == 4 && a[0] == 1.0f && a[1] == -2.0f && a[3] == 1e6f, "float32 values");
  }

  @SuppressWarnings("unchecked")
  static void results(Path fixtures, Path out) throws Exception {
    for (Path dir : children(fixtures.resolve("results"))) {
      Result r = Result.read(dir);
      Map<String, Object> doc = r.document;
      Path dest = out.resolve("results").resolve(dir.getFileName());
      ResultWriter w = ResultWriter.create(dest, (String) doc.get("job_id"),
          (String) doc.get("model_sha256"), (Map<String, Object>) doc.get("harness"),
          (Map<String, Object>) doc.get("device"));
      for (Map<String, Object> rec : r.backends()) {
        ResultWriter.Backend b = w.backend((String) rec.get("backend"));
        b.status = (String) rec.get("status");
        b.error = (String) rec.get("error");
        b.compileSeconds = rec.get("compile_seconds") == null ? null
            : ((Number) rec.get("compile_seconds")).doubleValue();
        for (Object t : (List<Object>) rec.get("warmup_seconds")) {
          b.warmupSeconds.add(((Number) t).doubleValue());
        }
        for (Object each : (List<Object>) rec.get("run_seconds")) {
          List<Double> times = new ArrayList<>();
          for (Object t : (List<Object>) each) {
            times.add(((Number) t).doubleValue());
          }
          b.runSeconds.add(times);
        }
        b.fullyAccelerated = (Boolean) rec.get("fully_accelerated");
        b.opsTotal = rec.get("ops_total") == null ? null
            : Math.toIntExact((Long) rec.get("ops_total"));
        b.opsDelegated = rec.get("ops_delegated") == null ? null
            : Math.toIntExact((Long) rec.get("ops_delegated"));
        b.delegateLog = (String) rec.get("delegate_log");
        b.gpu = (Map<String, Object>) rec.get("gpu");
        for (Map.Entry<String, Object> e :
            ((Map<String, Object>) rec.get("unreadable")).entrySet()) {
          b.unreadable.put(e.getKey(), (String) e.getValue());
        }
        if (rec.get("wall_seconds") != null) {
          b.wallSeconds = ((Number) rec.get("wall_seconds")).doubleValue();
        }
        for (List<Tensor> set : r.outputs.get(b.name)) {
          b.addOutputs(set);
        }
      }
      w.finish(((Number) doc.get("wall_seconds")).doubleValue());
      Result again = Result.read(dest);
      for (Map.Entry<String, List<List<Tensor>>> e : r.outputs.entrySet()) {
        List<List<Tensor>> got = again.outputs.get(e.getKey());
        check(got.size() == e.getValue().size(), "sets of " + e.getKey());
        for (int s = 0; s < got.size(); s++) {
          for (int k = 0; k < got.get(s).size(); k++) {
            check(got.get(s).get(k).sameContent(e.getValue().get(s).get(k)), "output " + k);
          }
        }
      }
      check(normalize(again.document).equals(normalize(doc)), "result.json round trip " + dir);
    }
    Result dtypes = Result.read(fixtures.resolve("results/all_dtypes"));
    List<Tensor> cpu = dtypes.outputs.get("cpu").get(0);
    Tensor i64 = cpu.stream().filter(t -> t.dtype == DType.INT64).findFirst().get();
    check(i64.toLongArray()[0] == Long.MIN_VALUE && i64.toLongArray()[5] == Long.MAX_VALUE, "int64");
    Tensor b = cpu.stream().filter(t -> t.dtype == DType.BOOL).findFirst().get();
    check(b.toBooleanArray()[0] && !b.toBooleanArray()[1], "bool values");
    check(dtypes.outputs.get("gpu_fp16").isEmpty(), "a failed backend has no outputs");
  }

  /** Numbers compared by value (JSON does not keep 1 and 1.0 apart). */
  @SuppressWarnings("unchecked")
  static Object normalize(Object v) {
    if (v instanceof Number) {
      return ((Number) v).doubleValue();
    }
    if (v instanceof Map) {
      Map<String, Object> m = new LinkedHashMap<>();
      for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
        m.put(e.getKey(), normalize(e.getValue()));
      }
      return m;
    }
    if (v instanceof List) {
      List<Object> l = new ArrayList<>();
      for (Object o : (List<Object>) v) {
        l.add(normalize(o));
      }
      return l;
    }
    return v;
  }

  static void errors(Path fixtures, Path out) throws Exception {
    Path bad = out.resolve("bad");
    copy(fixtures.resolve("jobs/all_dtypes_raw"), bad.resolve("truncated"));
    Files.write(bad.resolve("truncated/inputs/0/3.bin"), new byte[5]);
    Job truncated = Job.read(bad.resolve("truncated"));
    expectProtocolError(() -> truncated.inputs(0), "3.bin: 5 bytes, int32[2, 3] needs 24");

    copy(fixtures.resolve("jobs/add"), bad.resolve("schema"));
    Path jobJson = bad.resolve("schema/job.json");
    String text = new String(Files.readAllBytes(jobJson), StandardCharsets.UTF_8);
    Files.write(jobJson, text.replace("device-job/1", "device-job/9").getBytes(StandardCharsets.UTF_8));
    expectProtocolError(() -> Job.read(bad.resolve("schema")), "tflkit.device-job/9");

    copy(fixtures.resolve("jobs/add"), bad.resolve("escape"));
    jobJson = bad.resolve("escape/job.json");
    Files.write(jobJson, text.replace("\"inputs/0/0.npy\"", "\"../../etc/passwd.npy\"")
        .getBytes(StandardCharsets.UTF_8));
    Job escape = Job.read(bad.resolve("escape"));
    expectProtocolError(() -> escape.inputs(0), "leaves the job folder");

    byte[] bigEndian = Npy.encode(Tensor.ofInts("x", new long[] {1}, new int[] {7}));
    String header = new String(bigEndian, StandardCharsets.ISO_8859_1).replace("<i4", ">i4");
    expectProtocolError(
        () -> Npy.parse(header.getBytes(StandardCharsets.ISO_8859_1), "x", "be.npy"), "'>i4'");
    expectProtocolError(() -> Json.parse("{\"a\": [1, 2,]}"), "invalid JSON");
    expectProtocolError(
        () -> ResultWriter.create(fixtures.resolve("results/add"), "x", null, null, null),
        "not empty");
  }

  /** A second process resumes a result folder: restored records and files survive. */
  static void resume(Path out) throws Exception {
    Path dir = out.resolve("resumed");
    Map<String, Object> harness = new LinkedHashMap<>();
    harness.put("kind", "android");
    harness.put("version", "1");
    harness.put("runtime", "test");
    ResultWriter first = ResultWriter.create(dir, "job", null, harness, new LinkedHashMap<>());
    ResultWriter.Backend cpu = first.backend("cpu");
    cpu.status = "ok";
    cpu.addOutputs(Arrays.asList(Tensor.ofLongs("y", new long[] {2}, new long[] {-1, 1})));
    Map<String, Object> saved = Json.map(Json.parse(Json.write(cpu.toJson())), "saved");
    ResultWriter second = ResultWriter.resume(dir, "job", null, harness, new LinkedHashMap<>());
    second.restore(saved);
    ResultWriter.Backend gpu = second.backend("gpu_fp16");
    gpu.status = "crashed";
    gpu.error = "the process died during compile";
    gpu.addOutputs(Arrays.asList(Tensor.ofLongs("y", new long[] {2}, new long[] {0, 0})));
    second.finish(1.0);
    Result r = Result.read(dir);
    check(r.outputs.get("cpu").get(0).get(0).toLongArray()[0] == -1, "restored outputs");
    check(r.outputs.get("gpu_fp16").isEmpty(), "a crashed backend reports no outputs");
  }

  static void json() throws Exception {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("text", "quote \" backslash \\ newline \n tab \t unicode é \u0001");
    m.put("numbers", Arrays.asList(0L, -12L, 1.5, 1e-7, 3.0e20));
    m.put("flags", Arrays.asList(true, false, null));
    m.put("empty", new LinkedHashMap<>());
    check(Json.parse(Json.write(m)).equals(m), "JSON round trip");
  }

  private static void copy(Path from, Path to) throws IOException {
    try (Stream<Path> s = Files.walk(from)) {
      for (Path p : s.collect(Collectors.toList())) {
        Path target = to.resolve(from.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(target);
        } else {
          Files.copy(p, target);
        }
      }
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: ProtocolTests FIXTURES_DIR OUT_DIR");
      System.exit(2);
    }
    Path fixtures = Paths.get(args[0]);
    Path out = Paths.get(args[1]);
    try {
      json();
      jobs(fixtures, out);
      results(fixtures, out);
      errors(fixtures, out);
      resume(out);
    } catch (AssertionError e) {
      System.out.println("FAIL after " + checks + " checks: " + e.getMessage());
      System.exit(1);
    }
    System.out.println("ok: " + checks + " checks");
  }
}
