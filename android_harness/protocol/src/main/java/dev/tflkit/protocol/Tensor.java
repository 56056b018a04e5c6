package dev.tflkit.protocol;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/** A named array: dtype, shape and its elements as little-endian bytes (C order). */
public final class Tensor {
  public final String name;
  public final DType dtype;
  public final long[] shape;
  private final byte[] data;

  public Tensor(String name, DType dtype, long[] shape, byte[] data) throws ProtocolException {
    this.name = name;
    this.dtype = dtype;
    this.shape = shape.clone();
    long expected = elementCount(shape) * dtype.itemSize;
    if (data.length != expected) {
      throw new ProtocolException(
          "tensor '" + name + "': " + data.length + " bytes, " + dtype.protocolName
              + Arrays.toString(shape) + " needs " + expected);
    }
    this.data = data;
  }

  public static long elementCount(long[] shape) {
    long n = 1;
    for (long d : shape) {
      n *= d;
    }
    return n;
  }

  public long elementCount() {
    return elementCount(shape);
  }

  /** The raw little-endian bytes (a copy). */
  public byte[] bytes() {
    return data.clone();
  }

  /** A little-endian read-only view of the bytes. */
  public ByteBuffer buffer() {
    return ByteBuffer.wrap(data).asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
  }

  public Tensor renamed(String newName) throws ProtocolException {
    return new Tensor(newName, dtype, shape, data);
  }

  /** Shape as an int array (LiteRT's Java APIs take ints). */
  public int[] intShape() {
    int[] out = new int[shape.length];
    for (int i = 0; i < shape.length; i++) {
      out[i] = Math.toIntExact(shape[i]);
    }
    return out;
  }

  public float[] toFloatArray() {
    if (dtype != DType.FLOAT32) {
      throw new IllegalStateException(name + " is " + dtype.protocolName + ", not float32");
    }
    float[] out = new float[Math.toIntExact(elementCount())];
    buffer().asFloatBuffer().get(out);
    return out;
  }

  public int[] toIntArray() {
    if (dtype != DType.INT32) {
      throw new IllegalStateException(name + " is " + dtype.protocolName + ", not int32");
    }
    int[] out = new int[Math.toIntExact(elementCount())];
    buffer().asIntBuffer().get(out);
    return out;
  }

  public long[] toLongArray() {
    if (dtype != DType.INT64) {
      throw new IllegalStateException(name + " is " + dtype.protocolName + ", not int64");
    }
    long[] out = new long[Math.toIntExact(elementCount())];
    buffer().asLongBuffer().get(out);
    return out;
  }

  public boolean[] toBooleanArray() {
    if (dtype != DType.BOOL) {
      throw new IllegalStateException(name + " is " + dtype.protocolName + ", not bool");
    }
    boolean[] out = new boolean[data.length];
    for (int i = 0; i < data.length; i++) {
      out[i] = data[i] != 0;
    }
    return out;
  }

  public static Tensor ofFloats(String name, long[] shape, float[] values)
      throws ProtocolException {
    ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().put(values);
    return new Tensor(name, DType.FLOAT32, shape, b.array());
  }

  public static Tensor ofInts(String name, long[] shape, int[] values) throws ProtocolException {
    ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    b.asIntBuffer().put(values);
    return new Tensor(name, DType.INT32, shape, b.array());
  }

  public static Tensor ofLongs(String name, long[] shape, long[] values)
      throws ProtocolException {
    ByteBuffer b = ByteBuffer.allocate(values.length * 8).order(ByteOrder.LITTLE_ENDIAN);
    b.asLongBuffer().put(values);
    return new Tensor(name, DType.INT64, shape, b.array());
  }

  public static Tensor ofBooleans(String name, long[] shape, boolean[] values)
      throws ProtocolException {
    byte[] bytes = new byte[values.length];
    for (int i = 0; i < values.length; i++) {
      bytes[i] = (byte) (values[i] ? 1 : 0);
    }
    return new Tensor(name, DType.BOOL, shape, bytes);
  }

  /** int8 or uint8 elements from bytes (the same bits). */
  public static Tensor ofBytes(String name, DType dtype, long[] shape, byte[] values)
      throws ProtocolException {
    return new Tensor(name, dtype, shape, values.clone());
  }

  public boolean sameContent(Tensor other) {
    return dtype == other.dtype && Arrays.equals(shape, other.shape)
        && Arrays.equals(data, other.data);
  }
}
