package dev.tflkit.protocol;

/** A job or result folder that does not follow the tflkit device protocol. */
public final class ProtocolException extends Exception {
  private static final long serialVersionUID = 1L;

  public ProtocolException(String message) {
    super(message);
  }
}
