package dev.tflkit.protocol;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/** A job folder (``job.json``, the model, the input sets), as the harnesses read it. */
public final class Job {
  public static final String SCHEMA = "tflkit.device-job/1";
  public static final List<String> BACKENDS =
      Collections.unmodifiableList(Arrays.asList("cpu", "gpu_fp16", "gpu_fp32", "gpu_delegate"));

  /** One input's manifest entry. */
  public static final class Entry {
    public final String name;
    public final DType dtype;
    public final long[] shape;
    public final String file;

    Entry(String name, DType dtype, long[] shape, String file) {
      this.name = name;
      this.dtype = dtype;
      this.shape = shape;
      this.file = file;
    }
  }

  public final Path dir;
  public final String id;
  public final Path model;
  public final String modelSha256;
  public final String signature;
  public final String inputFormat;
  public final List<List<Entry>> inputSets;
  public final List<String> backends;
  public final Integer threads;
  public final int warmupRuns;
  public final int timedRuns;
  public final double timeoutSeconds;
  public final List<String> dumpTensors;

  private Job(Path dir, Map<String, Object> doc) throws ProtocolException {
    this.dir = dir;
    if (!SCHEMA.equals(doc.get("schema"))) {
      throw new ProtocolException(
          "job.json schema is '" + doc.get("schema") + "'; this harness reads " + SCHEMA);
    }
    id = str(doc, "id", true);
    Map<String, Object> modelDoc = map(doc.get("model"), "model");
    model = resolve(str(modelDoc, "file", true));
    modelSha256 = str(modelDoc, "sha256", false);
    signature = str(doc, "signature", false);
    inputFormat = str(doc, "input_format", true);
    if (!inputFormat.equals("npy") && !inputFormat.equals("raw")) {
      throw new ProtocolException("input_format must be npy or raw, not " + inputFormat);
    }
    List<List<Entry>> sets = new ArrayList<>();
    for (Object set : list(doc.get("input_sets"), "input_sets")) {
      List<Entry> entries = new ArrayList<>();
      for (Object e : list(set, "input set")) {
        Map<String, Object> m = map(e, "input");
        entries.add(new Entry(str(m, "name", true), DType.fromName(str(m, "dtype", true)),
            shape(m.get("shape")), str(m, "file", true)));
      }
      sets.add(Collections.unmodifiableList(entries));
    }
    if (sets.isEmpty()) {
      throw new ProtocolException("job.json has no input sets");
    }
    inputSets = Collections.unmodifiableList(sets);
    List<String> names = new ArrayList<>();
    for (Object b : list(doc.get("backends"), "backends")) {
      if (!(b instanceof String) || !BACKENDS.contains(b)) {
        throw new ProtocolException("unknown backend " + b + "; known: " + BACKENDS);
      }
      names.add((String) b);
    }
    if (names.isEmpty()) {
      throw new ProtocolException("job.json lists no backends");
    }
    backends = Collections.unmodifiableList(names);
    Object t = doc.get("threads");
    threads = t == null ? null : Math.toIntExact(((Number) t).longValue());
    warmupRuns = intOr(doc, "warmup_runs", 1);
    timedRuns = Math.max(1, intOr(doc, "timed_runs", 1));
    Object timeout = doc.get("timeout_seconds");
    timeoutSeconds = timeout == null ? 300.0 : ((Number) timeout).doubleValue();
    List<String> dumps = new ArrayList<>();
    Object d = doc.get("dump_tensors");
    if (d != null) {
      for (Object n : list(d, "dump_tensors")) {
        dumps.add(String.valueOf(n));
      }
    }
    dumpTensors = Collections.unmodifiableList(dumps);
    if (!Files.isRegularFile(model)) {
      throw new ProtocolException("the model file " + model.getFileName() + " is missing");
    }
  }

  /** Read and check ``dir/job.json`` (inputs are read lazily by {@link #inputs}). */
  public static Job read(Path dir) throws IOException, ProtocolException {
    Path path = dir.resolve("job.json");
    if (!Files.isRegularFile(path)) {
      throw new ProtocolException(dir + " is not a job folder (no job.json)");
    }
    String text = new String(Files.readAllBytes(path), StandardCharsets.UTF_8);
    return new Job(dir, map(Json.parse(text), "job.json"));
  }

  /** The tensors of input set ``index``, checked against the manifest. */
  public List<Tensor> inputs(int index) throws IOException, ProtocolException {
    List<Tensor> out = new ArrayList<>();
    for (Entry e : inputSets.get(index)) {
      Path path = resolve(e.file);
      Tensor t;
      if (e.file.endsWith(".npy")) {
        t = Npy.read(path, e.name);
        if (t.dtype != e.dtype || !Arrays.equals(t.shape, e.shape)) {
          throw new ProtocolException(e.file + " holds " + t.dtype.protocolName
              + Arrays.toString(t.shape) + ", the job says " + e.dtype.protocolName
              + Arrays.toString(e.shape));
        }
      } else {
        byte[] raw = Files.readAllBytes(path);
        long need = Tensor.elementCount(e.shape) * e.dtype.itemSize;
        if (raw.length != need) {
          throw new ProtocolException(e.file + ": " + raw.length + " bytes, "
              + e.dtype.protocolName + Arrays.toString(e.shape) + " needs " + need);
        }
        t = new Tensor(e.name, e.dtype, e.shape, raw);
      }
      out.add(t);
    }
    return out;
  }

  private Path resolve(String rel) throws ProtocolException {
    Path p = dir.resolve(rel).normalize();
    if (rel.startsWith("/") || !p.startsWith(dir.normalize())) {
      throw new ProtocolException("path " + rel + " leaves the job folder");
    }
    return p;
  }

  static long[] shape(Object value) throws ProtocolException {
    List<Object> dims = list(value, "shape");
    long[] out = new long[dims.size()];
    for (int i = 0; i < out.length; i++) {
      if (!(dims.get(i) instanceof Long) || (Long) dims.get(i) < 0) {
        throw new ProtocolException("bad dimension " + dims.get(i) + " in shape " + dims);
      }
      out[i] = (Long) dims.get(i);
    }
    return out;
  }

  static Map<String, Object> map(Object value, String what) throws ProtocolException {
    return Json.map(value, what);
  }

  @SuppressWarnings("unchecked")
  static List<Object> list(Object value, String what) throws ProtocolException {
    if (!(value instanceof List)) {
      throw new ProtocolException(what + " must be a JSON array");
    }
    return (List<Object>) value;
  }

  static String str(Map<String, Object> m, String key, boolean required)
      throws ProtocolException {
    Object v = m.get(key);
    if (v == null && !required) {
      return null;
    }
    if (!(v instanceof String)) {
      throw new ProtocolException("'" + key + "' must be a string");
    }
    return (String) v;
  }

  static int intOr(Map<String, Object> m, String key, int fallback) {
    Object v = m.get(key);
    return v instanceof Number ? Math.toIntExact(((Number) v).longValue()) : fallback;
  }

  /** Little-endian view of a byte array (helper for runtimes that take ByteBuffers). */
  public static ByteBuffer direct(byte[] bytes) {
    ByteBuffer b = ByteBuffer.allocateDirect(bytes.length).order(ByteOrder.nativeOrder());
    b.put(bytes);
    b.rewind();
    return b;
  }
}
