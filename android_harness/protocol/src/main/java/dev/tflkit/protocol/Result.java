package dev.tflkit.protocol;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A result folder read back: the document and every backend's output sets. */
public final class Result {
  public final Path dir;
  public final Map<String, Object> document;
  /** backend -> input set -> outputs in order. */
  public final Map<String, List<List<Tensor>>> outputs = new LinkedHashMap<>();
  public final Map<String, List<List<Tensor>>> dumps = new LinkedHashMap<>();

  private Result(Path dir, Map<String, Object> document) {
    this.dir = dir;
    this.document = document;
  }

  public static Result read(Path dir) throws IOException, ProtocolException {
    Path path = dir.resolve("result.json");
    if (!Files.isRegularFile(path)) {
      throw new ProtocolException(dir + " is not a result folder (no result.json)");
    }
    Map<String, Object> doc = Job.map(
        Json.parse(new String(Files.readAllBytes(path), StandardCharsets.UTF_8)), "result.json");
    if (!ResultWriter.SCHEMA.equals(doc.get("schema"))) {
      throw new ProtocolException("result.json schema is '" + doc.get("schema") + "'");
    }
    Result r = new Result(dir, doc);
    for (Object b : Job.list(doc.get("backends"), "backends")) {
      Map<String, Object> rec = Job.map(b, "backend");
      String name = Job.str(rec, "backend", true);
      r.outputs.put(name, r.load(rec.get("outputs")));
      r.dumps.put(name, r.load(rec.get("dumps")));
    }
    return r;
  }

  @SuppressWarnings("unchecked")
  public List<Map<String, Object>> backends() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Object b : (List<Object>) document.get("backends")) {
      out.add((Map<String, Object>) b);
    }
    return out;
  }

  private List<List<Tensor>> load(Object sets) throws IOException, ProtocolException {
    List<List<Tensor>> out = new ArrayList<>();
    if (sets == null) {
      return out;
    }
    for (Object set : Job.list(sets, "output sets")) {
      List<Tensor> tensors = new ArrayList<>();
      for (Object e : Job.list(set, "outputs")) {
        Map<String, Object> m = Job.map(e, "output");
        String rel = Job.str(m, "file", true);
        Path p = dir.resolve(rel).normalize();
        if (!rel.endsWith(".npy") || !p.startsWith(dir.normalize())) {
          throw new ProtocolException("result file " + rel + " is not an .npy in the folder");
        }
        Tensor t = Npy.read(p, Job.str(m, "name", true));
        DType dtype = DType.fromName(Job.str(m, "dtype", true));
        long[] shape = Job.shape(m.get("shape"));
        if (t.dtype != dtype || !Arrays.equals(t.shape, shape)) {
          throw new ProtocolException(rel + " does not match its entry in result.json");
        }
        tensors.add(t);
      }
      out.add(tensors);
    }
    return out;
  }
}
