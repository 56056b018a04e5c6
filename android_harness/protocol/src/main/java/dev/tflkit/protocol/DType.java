package dev.tflkit.protocol;

/** The element types of the protocol, with their NumPy descriptors (always little-endian). */
public enum DType {
  INT8("int8", "|i1", 1),
  UINT8("uint8", "|u1", 1),
  INT16("int16", "<i2", 2),
  INT32("int32", "<i4", 4),
  INT64("int64", "<i8", 8),
  BOOL("bool", "|b1", 1),
  FLOAT16("float16", "<f2", 2),
  FLOAT32("float32", "<f4", 4);

  /** The name used in job.json and result.json (NumPy's dtype name). */
  public final String protocolName;
  /** The descriptor NumPy writes in an .npy header. */
  public final String npyDescr;
  /** Bytes per element. */
  public final int itemSize;

  DType(String protocolName, String npyDescr, int itemSize) {
    this.protocolName = protocolName;
    this.npyDescr = npyDescr;
    this.itemSize = itemSize;
  }

  public static DType fromName(String name) throws ProtocolException {
    for (DType t : values()) {
      if (t.protocolName.equals(name)) {
        return t;
      }
    }
    throw new ProtocolException("unknown dtype '" + name + "'");
  }

  public static DType fromNpyDescr(String descr) throws ProtocolException {
    String normalized = descr;
    if (descr.length() == 3 && descr.charAt(0) == '=') {
      normalized = (descr.charAt(2) == '1' ? "|" : "<") + descr.substring(1);
    }
    if (normalized.equals("<i1") || normalized.equals("<u1") || normalized.equals("<b1")) {
      normalized = "|" + normalized.substring(1);
    }
    for (DType t : values()) {
      if (t.npyDescr.equals(normalized)) {
        return t;
      }
    }
    throw new ProtocolException(
        "unsupported .npy dtype '" + descr + "' (big-endian or not in the protocol)");
  }
}
