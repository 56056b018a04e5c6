package dev.tflkit.protocol;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Writes a result folder: ``outputs/<backend>/<set>/<k>.npy`` as each backend finishes, then
 * ``result.json`` last and atomically, so its presence means the folder is complete.
 */
public final class ResultWriter {
  public static final String SCHEMA = "tflkit.device-result/1";

  /** One backend's record; fields map one to one onto result.json. */
  public final class Backend {
    public final String name;
    public String status;
    public String error;
    public Double compileSeconds;
    public final List<Double> warmupSeconds = new ArrayList<>();
    public final List<List<Double>> runSeconds = new ArrayList<>();
    public Boolean fullyAccelerated;
    public Integer opsTotal;
    public Integer opsDelegated;
    public String delegateLog = "";
    public Map<String, Object> gpu;
    public final Map<String, String> unreadable = new LinkedHashMap<>();
    public double wallSeconds;
    private final List<Object> outputs = new ArrayList<>();
    private final List<Object> dumps = new ArrayList<>();

    Backend(String name) {
      this.name = name;
    }

    /** Write one input set's outputs (in order) and record them. */
    public void addOutputs(List<Tensor> tensors) throws IOException {
      outputs.add(save("outputs", outputs.size(), tensors));
    }

    /** Write one input set's dumped intermediate tensors and record them. */
    public void addDumps(List<Tensor> tensors) throws IOException {
      dumps.add(save("dumps", dumps.size(), tensors));
    }

    /** Forget written outputs (a backend that failed half-way reports none). */
    public void dropOutputs() {
      outputs.clear();
      dumps.clear();
    }

    private List<Object> save(String folder, int set, List<Tensor> tensors) throws IOException {
      List<Object> entries = new ArrayList<>();
      for (int k = 0; k < tensors.size(); k++) {
        Tensor t = tensors.get(k);
        String rel = folder + "/" + name + "/" + set + "/" + k + ".npy";
        Npy.write(dir.resolve(rel), t);
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("name", t.name);
        e.put("dtype", t.dtype.protocolName);
        List<Object> shape = new ArrayList<>();
        for (long d : t.shape) {
          shape.add(d);
        }
        e.put("shape", shape);
        e.put("file", rel);
        entries.add(e);
      }
      return entries;
    }

    public Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("backend", name);
      m.put("status", status);
      m.put("error", error);
      m.put("compile_seconds", compileSeconds);
      m.put("warmup_seconds", new ArrayList<Object>(warmupSeconds));
      List<Object> runs = new ArrayList<>();
      for (List<Double> each : runSeconds) {
        runs.add(new ArrayList<Object>(each));
      }
      m.put("run_seconds", runs);
      m.put("fully_accelerated", fullyAccelerated);
      m.put("ops_total", opsTotal == null ? null : (long) opsTotal);
      m.put("ops_delegated", opsDelegated == null ? null : (long) opsDelegated);
      m.put("delegate_log", delegateLog);
      m.put("gpu", gpu);
      m.put("outputs", "ok".equals(status) ? outputs : new ArrayList<>());
      m.put("unreadable", new LinkedHashMap<String, Object>(unreadable));
      m.put("dumps", "ok".equals(status) ? dumps : new ArrayList<>());
      m.put("wall_seconds", wallSeconds);
      return m;
    }
  }

  private final Path dir;
  private final Map<String, Object> header = new LinkedHashMap<>();
  /** Backend objects, or records restored from an earlier process (see {@link #restore}). */
  private final List<Object> records = new ArrayList<>();

  private ResultWriter(Path dir) {
    this.dir = dir;
  }

  /** Start a result folder at ``dir``, which must not exist or be empty. */
  public static ResultWriter create(
      Path dir,
      String jobId,
      String modelSha256,
      Map<String, Object> harness,
      Map<String, Object> device)
      throws IOException, ProtocolException {
    if (Files.isDirectory(dir)) {
      try (Stream<Path> entries = Files.list(dir)) {
        if (entries.findAny().isPresent()) {
          throw new ProtocolException(dir + " exists and is not empty");
        }
      }
    }
    return resume(dir, jobId, modelSha256, harness, device);
  }

  /**
   * Reopen a result folder that an earlier process of the harness started (it died, e.g. killed
   * by a GPU driver): outputs already written stay, records come back through {@link #restore}.
   */
  public static ResultWriter resume(
      Path dir,
      String jobId,
      String modelSha256,
      Map<String, Object> harness,
      Map<String, Object> device)
      throws IOException {
    Files.createDirectories(dir);
    ResultWriter w = new ResultWriter(dir);
    w.header.put("schema", SCHEMA);
    w.header.put("job_id", jobId);
    w.header.put("model_sha256", modelSha256);
    w.header.put("harness", harness);
    w.header.put("device", device);
    return w;
  }

  public Backend backend(String name) {
    Backend b = new Backend(name);
    records.add(b);
    return b;
  }

  /** Add a finished record as {@link Backend#toJson} made it (kept in a state file). */
  public void restore(Map<String, Object> record) {
    records.add(record);
  }

  /** Write result.json (temp file + rename). */
  public Path finish(double wallSeconds) throws IOException {
    Map<String, Object> doc = new LinkedHashMap<>(header);
    List<Object> all = new ArrayList<>();
    for (Object r : records) {
      all.add(r instanceof Backend ? ((Backend) r).toJson() : r);
    }
    doc.put("backends", all);
    doc.put("wall_seconds", wallSeconds);
    Path tmp = dir.resolve(".result.json.tmp");
    Files.write(tmp, Json.write(doc).getBytes(StandardCharsets.UTF_8));
    Path target = dir.resolve("result.json");
    Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    return target;
  }
}
