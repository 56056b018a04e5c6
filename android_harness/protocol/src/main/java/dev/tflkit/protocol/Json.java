package dev.tflkit.protocol;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Minimal JSON for the protocol files (no dependency, so the module runs on any JVM and on
 * Android). Objects become LinkedHashMap, arrays ArrayList, integers Long, other numbers Double.
 */
public final class Json {
  private final String text;
  private int pos;

  private Json(String text) {
    this.text = text;
  }

  public static Object parse(String text) throws ProtocolException {
    Json p = new Json(text);
    p.skip();
    Object value = p.value();
    p.skip();
    if (p.pos != text.length()) {
      throw p.error("trailing characters");
    }
    return value;
  }

  private ProtocolException error(String what) {
    return new ProtocolException("invalid JSON at offset " + pos + ": " + what);
  }

  private void skip() {
    while (pos < text.length() && Character.isWhitespace(text.charAt(pos))) {
      pos++;
    }
  }

  private Object value() throws ProtocolException {
    if (pos >= text.length()) {
      throw error("unexpected end");
    }
    char c = text.charAt(pos);
    if (c == '{') {
      return object();
    }
    if (c == '[') {
      return array();
    }
    if (c == '"') {
      return string();
    }
    if (text.startsWith("true", pos)) {
      pos += 4;
      return Boolean.TRUE;
    }
    if (text.startsWith("false", pos)) {
      pos += 5;
      return Boolean.FALSE;
    }
    if (text.startsWith("null", pos)) {
      pos += 4;
      return null;
    }
    return number();
  }

  private Map<String, Object> object() throws ProtocolException {
    Map<String, Object> map = new LinkedHashMap<>();
    pos++;
    skip();
    if (pos < text.length() && text.charAt(pos) == '}') {
      pos++;
      return map;
    }
    while (true) {
      skip();
      if (pos >= text.length() || text.charAt(pos) != '"') {
        throw error("expected a key");
      }
      String key = string();
      skip();
      if (pos >= text.length() || text.charAt(pos) != ':') {
        throw error("expected ':'");
      }
      pos++;
      skip();
      map.put(key, value());
      skip();
      if (pos < text.length() && text.charAt(pos) == ',') {
        pos++;
      } else if (pos < text.length() && text.charAt(pos) == '}') {
        pos++;
        return map;
      } else {
        throw error("expected ',' or '}'");
      }
    }
  }

  private List<Object> array() throws ProtocolException {
    List<Object> list = new ArrayList<>();
    pos++;
    skip();
    if (pos < text.length() && text.charAt(pos) == ']') {
      pos++;
      return list;
    }
    while (true) {
      skip();
      list.add(value());
      skip();
      if (pos < text.length() && text.charAt(pos) == ',') {
        pos++;
      } else if (pos < text.length() && text.charAt(pos) == ']') {
        pos++;
        return list;
      } else {
        throw error("expected ',' or ']'");
      }
    }
  }

  private String string() throws ProtocolException {
    StringBuilder b = new StringBuilder();
    pos++;
    while (pos < text.length()) {
      char c = text.charAt(pos++);
      if (c == '"') {
        return b.toString();
      }
      if (c != '\\') {
        b.append(c);
        continue;
      }
      if (pos >= text.length()) {
        break;
      }
      char e = text.charAt(pos++);
      switch (e) {
        case 'n': b.append('\n'); break;
        case 't': b.append('\t'); break;
        case 'r': b.append('\r'); break;
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'u':
          if (pos + 4 > text.length()) {
            throw error("bad \\u escape");
          }
          b.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
          pos += 4;
          break;
        default: b.append(e);
      }
    }
    throw error("unterminated string");
  }

  private Object number() throws ProtocolException {
    int start = pos;
    while (pos < text.length() && "+-0123456789.eE".indexOf(text.charAt(pos)) >= 0) {
      pos++;
    }
    String s = text.substring(start, pos);
    if (s.isEmpty()) {
      throw error("unexpected character '" + text.charAt(pos) + "'");
    }
    try {
      if (s.contains(".") || s.contains("e") || s.contains("E")) {
        return Double.parseDouble(s);
      }
      return Long.parseLong(s);
    } catch (NumberFormatException ex) {
      throw error("bad number " + s);
    }
  }

  /** ``value`` as a JSON object, or a ProtocolException naming ``what``. */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> map(Object value, String what) throws ProtocolException {
    if (!(value instanceof Map)) {
      throw new ProtocolException(what + " must be a JSON object");
    }
    return (Map<String, Object>) value;
  }

  /** Serialize maps, lists, strings, numbers, booleans and null (one space of indent). */
  public static String write(Object value) {
    StringBuilder b = new StringBuilder();
    write(b, value, 0);
    return b.append('\n').toString();
  }

  private static void indent(StringBuilder b, int depth) {
    b.append('\n');
    for (int i = 0; i < depth; i++) {
      b.append(' ');
    }
  }

  private static void write(StringBuilder b, Object value, int depth) {
    if (value == null) {
      b.append("null");
    } else if (value instanceof String) {
      quote(b, (String) value);
    } else if (value instanceof Boolean || value instanceof Long || value instanceof Integer) {
      b.append(value);
    } else if (value instanceof Number) {
      double d = ((Number) value).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        b.append("null");
      } else {
        b.append(Double.toString(d));
      }
    } else if (value instanceof Map) {
      Map<?, ?> map = (Map<?, ?>) value;
      if (map.isEmpty()) {
        b.append("{}");
        return;
      }
      b.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : map.entrySet()) {
        if (!first) {
          b.append(',');
        }
        first = false;
        indent(b, depth + 1);
        quote(b, String.valueOf(e.getKey()));
        b.append(": ");
        write(b, e.getValue(), depth + 1);
      }
      indent(b, depth);
      b.append('}');
    } else if (value instanceof List) {
      List<?> list = (List<?>) value;
      if (list.isEmpty()) {
        b.append("[]");
        return;
      }
      b.append('[');
      for (int i = 0; i < list.size(); i++) {
        if (i > 0) {
          b.append(',');
        }
        indent(b, depth + 1);
        write(b, list.get(i), depth + 1);
      }
      indent(b, depth);
      b.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + value.getClass() + " as JSON");
    }
  }

  private static void quote(StringBuilder b, String s) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        case '\n': b.append("\\n"); break;
        case '\r': b.append("\\r"); break;
        case '\t': b.append("\\t"); break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    b.append('"');
  }
}
