package dev.tflkit.protocol;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * NumPy .npy files (format 1.0-3.0 read, 1.0 written), C order, little-endian, the protocol's
 * dtypes only. The header is written exactly as NumPy 2 writes it, so files are byte-identical.
 */
public final class Npy {
  private static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
  private static final int ARRAY_ALIGN = 64;
  private static final int GROWTH_AXIS_MAX_DIGITS = 21;
  private static final Pattern DESCR = Pattern.compile("'descr':\\s*'([^']*)'");
  private static final Pattern FORTRAN = Pattern.compile("'fortran_order':\\s*(True|False)");
  private static final Pattern SHAPE = Pattern.compile("'shape':\\s*\\(([^)]*)\\)");

  private Npy() {}

  public static Tensor read(Path path, String name) throws IOException, ProtocolException {
    byte[] all = Files.readAllBytes(path);
    return parse(all, name, path.toString());
  }

  static Tensor parse(byte[] all, String name, String where) throws ProtocolException {
    if (all.length < 10) {
      throw new ProtocolException(where + ": not an .npy file (too short)");
    }
    for (int i = 0; i < MAGIC.length; i++) {
      if (all[i] != MAGIC[i]) {
        throw new ProtocolException(where + ": not an .npy file (bad magic)");
      }
    }
    int major = all[6] & 0xff;
    int headerLen;
    int start;
    if (major == 1) {
      headerLen = (all[8] & 0xff) | ((all[9] & 0xff) << 8);
      start = 10;
    } else if (major == 2 || major == 3) {
      if (all.length < 12) {
        throw new ProtocolException(where + ": truncated .npy header");
      }
      headerLen = (all[8] & 0xff) | ((all[9] & 0xff) << 8) | ((all[10] & 0xff) << 16)
          | ((all[11] & 0xff) << 24);
      start = 12;
    } else {
      throw new ProtocolException(where + ": .npy format version " + major + " is unknown");
    }
    if (start + headerLen > all.length) {
      throw new ProtocolException(where + ": truncated .npy header");
    }
    String header = new String(all, start, headerLen,
        major == 3 ? StandardCharsets.UTF_8 : StandardCharsets.ISO_8859_1);
    Matcher descr = DESCR.matcher(header);
    Matcher fortran = FORTRAN.matcher(header);
    Matcher shape = SHAPE.matcher(header);
    if (!descr.find() || !fortran.find() || !shape.find()) {
      throw new ProtocolException(where + ": cannot parse the .npy header " + header.trim());
    }
    if (fortran.group(1).equals("True")) {
      throw new ProtocolException(where + ": Fortran-order arrays are not supported");
    }
    DType dtype = DType.fromNpyDescr(descr.group(1));
    List<Long> dims = new ArrayList<>();
    for (String part : shape.group(1).split(",")) {
      if (!part.trim().isEmpty()) {
        dims.add(Long.parseLong(part.trim()));
      }
    }
    long[] dimsArray = dims.stream().mapToLong(Long::longValue).toArray();
    int offset = start + headerLen;
    long size = Tensor.elementCount(dimsArray) * dtype.itemSize;
    if (all.length - offset != size) {
      throw new ProtocolException(where + ": " + (all.length - offset) + " data bytes, the header"
          + " says " + size);
    }
    byte[] data = new byte[(int) size];
    System.arraycopy(all, offset, data, 0, data.length);
    return new Tensor(name, dtype, dimsArray, data);
  }

  /** The .npy bytes NumPy 2 would write for this tensor. */
  public static byte[] encode(Tensor tensor) {
    StringBuilder shape = new StringBuilder("(");
    for (int i = 0; i < tensor.shape.length; i++) {
      shape.append(tensor.shape[i]);
      shape.append(tensor.shape.length == 1 ? "," : (i + 1 < tensor.shape.length ? ", " : ""));
    }
    shape.append(")");
    StringBuilder header = new StringBuilder();
    header.append("{'descr': '").append(tensor.dtype.npyDescr).append("', ");
    header.append("'fortran_order': False, ");
    header.append("'shape': ").append(shape).append(", }");
    if (tensor.shape.length > 0) {
      int digits = Long.toString(tensor.shape[0]).length();
      spaces(header, GROWTH_AXIS_MAX_DIGITS - digits);
    }
    int hlen = header.length() + 1;
    int padlen = ARRAY_ALIGN - ((MAGIC.length + 2 + 2 + hlen) % ARRAY_ALIGN);
    spaces(header, padlen);
    header.append('\n');
    byte[] headerBytes = header.toString().getBytes(StandardCharsets.ISO_8859_1);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(MAGIC, 0, MAGIC.length);
    out.write(1);
    out.write(0);
    out.write(headerBytes.length & 0xff);
    out.write((headerBytes.length >> 8) & 0xff);
    out.write(headerBytes, 0, headerBytes.length);
    byte[] data = tensor.bytes();
    out.write(data, 0, data.length);
    return out.toByteArray();
  }

  private static void spaces(StringBuilder b, int n) {
    for (int i = 0; i < n; i++) {
      b.append(' ');
    }
  }

  public static void write(Path path, Tensor tensor) throws IOException {
    Path parent = path.getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    Files.write(path, encode(tensor));
  }
}
