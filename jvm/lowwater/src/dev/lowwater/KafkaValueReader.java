package dev.lowwater;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A Kafka record's value read in one pass: lowwater's KafkaShapedSource on its fast path.
 *
 * <p>{@code call(value, spec)} returns a row {@code (bad, f0, f1, ...)}: {@code bad} is null when
 * the value is one JSON object whose declared fields are each absent, {@code null} or of their
 * declared type, and the fields are then read as the partitioned log reads them
 * (lowwater/io/fields.py); otherwise {@code bad} says why, and the fields are null. The source
 * words a bad record's reason in Spark SQL (the few bad records take that slower path), so this
 * class decides only which records are good, and what their fields hold.
 *
 * <p>The JSON is strict, as the source's SQL checks read it: no NaN, no single quotes, no key given
 * twice (at any depth), one value and only whitespace after it, no escaped lone surrogate in a
 * string or a key, UTF-8 without a byte-order mark.
 *
 * <p>{@code spec} is a JSON array (a literal of the query, parsed once a task):
 * {@code [timestampRegex, dateRegex, [name, type], ...]}, the types canonical
 * (lowwater.io.fields.parse_fields). TIMESTAMP and DATE fields come out as epoch milliseconds.
 */
public final class KafkaValueReader implements UDF2<byte[], String, Row> {
    private static final long serialVersionUID = 1L;

    /** Strict as Jackson is by default, with keys given twice refused; keys are not interned (a topic
     *  whose records carry ever new keys would fill the JVM's string pool). */
    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .disable(JsonFactory.Feature.INTERN_FIELD_NAMES)
            .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(1000).build())
            .build();

    private static final int BIGINT = 0, INT = 1, SMALLINT = 2, TINYINT = 3, DOUBLE = 4, FLOAT = 5, STRING = 6,
            BOOLEAN = 7, TIMESTAMP = 8, DATE = 9, DECIMAL = 10;
    private static final long[][] RANGES = {
            {Long.MIN_VALUE, Long.MAX_VALUE}, {Integer.MIN_VALUE, Integer.MAX_VALUE},
            {Short.MIN_VALUE, Short.MAX_VALUE}, {Byte.MIN_VALUE, Byte.MAX_VALUE}};
    private static final double FLOAT_MAX = 3.4028234663852886e38;

    /** The declared fields, parsed from {@code spec}. */
    private static final class Spec {
        final String text;
        final Map<String, Integer> index = new HashMap<>();
        final int[] kinds;
        final int[] precision;
        final int[] scale;
        final BigDecimal[] bound;
        final Pattern timestamp;
        final Pattern date;

        Spec(String text) throws java.io.IOException {
            this.text = text;
            try (JsonParser p = JSON.createParser(text)) {
                expect(p.nextToken() == JsonToken.START_ARRAY);
                expect(p.nextToken() == JsonToken.VALUE_STRING);
                timestamp = Pattern.compile(p.getText());
                expect(p.nextToken() == JsonToken.VALUE_STRING);
                date = Pattern.compile(p.getText());
                java.util.List<String[]> fields = new java.util.ArrayList<>();
                while (p.nextToken() == JsonToken.START_ARRAY) {
                    expect(p.nextToken() == JsonToken.VALUE_STRING);
                    String name = p.getText();
                    expect(p.nextToken() == JsonToken.VALUE_STRING);
                    String type = p.getText();
                    expect(p.nextToken() == JsonToken.END_ARRAY);
                    fields.add(new String[]{name, type});
                }
                int n = fields.size();
                kinds = new int[n];
                precision = new int[n];
                scale = new int[n];
                bound = new BigDecimal[n];
                for (int i = 0; i < n; i++) {
                    String type = fields.get(i)[1];
                    index.put(fields.get(i)[0], i);
                    kinds[i] = kind(type);
                    if (kinds[i] == DECIMAL) {
                        String[] ps = type.substring(8, type.length() - 1).split(",");
                        precision[i] = Integer.parseInt(ps[0]);
                        scale[i] = Integer.parseInt(ps[1]);
                        bound[i] = BigDecimal.TEN.pow(precision[i] - scale[i]);
                    }
                }
            }
        }

        private static void expect(boolean ok) {
            if (!ok) {
                throw new IllegalArgumentException("KafkaValueReader: a malformed field spec");
            }
        }

        private static int kind(String type) {
            switch (type) {
                case "BIGINT": return BIGINT;
                case "INT": return INT;
                case "SMALLINT": return SMALLINT;
                case "TINYINT": return TINYINT;
                case "DOUBLE": return DOUBLE;
                case "FLOAT": return FLOAT;
                case "STRING": return STRING;
                case "BOOLEAN": return BOOLEAN;
                case "TIMESTAMP": return TIMESTAMP;
                case "DATE": return DATE;
                default:
                    if (type.startsWith("DECIMAL(")) {
                        return DECIMAL;
                    }
                    throw new IllegalArgumentException("KafkaValueReader: no field type " + type);
            }
        }
    }

    /** Thrown for a field whose value is not of its declared type. */
    private static final class NotItsType extends Exception {
        private static final long serialVersionUID = 1L;

        NotItsType(String message) {
            super(message, null, false, false);
        }
    }

    /** Reports malformed input (its default); a decoder is not thread-safe. */
    private static final ThreadLocal<CharsetDecoder> UTF8 =
            ThreadLocal.withInitial(StandardCharsets.UTF_8::newDecoder);

    private transient volatile Spec spec;

    @Override
    public Row call(byte[] value, String specText) throws Exception {
        Spec s = spec;
        if (s == null || !s.text.equals(specText)) {
            s = spec = new Spec(specText);
        }
        Object[] out = new Object[1 + s.kinds.length];
        out[0] = read(value, s, out);
        if (out[0] != null) {
            java.util.Arrays.fill(out, 1, out.length, null);
        }
        return RowFactory.create(out);
    }

    /** Reads {@code value} into {@code out[1..]}; returns why it is not an element, or null. */
    private String read(byte[] value, Spec s, Object[] out) {
        if (value == null) {
            return "a tombstone";
        }
        CharBuffer text;
        try {
            text = UTF8.get().decode(ByteBuffer.wrap(value));
        } catch (CharacterCodingException e) {
            return "not UTF-8";
        }
        int length = text.remaining();
        if (length > 0 && text.get(text.position()) == '\uFEFF') {
            return "a byte-order mark";
        }
        try (JsonParser p = JSON.createParser(text.array(), text.arrayOffset() + text.position(), length)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                return "not a JSON object";
            }
            JsonToken t;
            while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
                if (hasLoneSurrogate(p)) {
                    return "a lone surrogate in a key";
                }
                Integer i = s.index.get(p.currentName());
                t = p.nextToken();
                if (i == null) {
                    String why = skip(p, t);
                    if (why != null) {
                        return why;
                    }
                } else if (t != JsonToken.VALUE_NULL) {
                    try {
                        out[1 + i] = field(p, t, s, i);
                    } catch (NotItsType e) {
                        return "field " + p.currentName() + ": " + e.getMessage();
                    }
                }
            }
            if (t != JsonToken.END_OBJECT) {
                return "not a JSON object";
            }
            if (p.nextToken() != null) {
                return "more after the first value";
            }
        } catch (java.io.IOException | RuntimeException e) {  // Jackson's parse errors, its constraints
            return "invalid JSON: " + e.getMessage();
        }
        return null;
    }

    /** Steps over the value starting at {@code t}, checking its strings and keys. */
    private static String skip(JsonParser p, JsonToken t) throws java.io.IOException {
        if (t == JsonToken.VALUE_STRING) {
            return hasLoneSurrogate(p) ? "a lone surrogate in a string" : null;
        }
        if (t != JsonToken.START_OBJECT && t != JsonToken.START_ARRAY) {
            return null;
        }
        int depth = 1;
        while (depth > 0) {
            t = p.nextToken();
            if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
                depth++;
            } else if (t == JsonToken.END_OBJECT || t == JsonToken.END_ARRAY) {
                depth--;
            } else if ((t == JsonToken.VALUE_STRING || t == JsonToken.FIELD_NAME) && hasLoneSurrogate(p)) {
                return "a lone surrogate in a string";
            } else if (t == null) {
                return "not a JSON object";
            }
        }
        return null;
    }

    /** Whether the current string or key holds a surrogate that is not half of a pair. */
    private static boolean hasLoneSurrogate(JsonParser p) throws java.io.IOException {
        char[] chars = p.getTextCharacters();
        int from = p.getTextOffset(), to = from + p.getTextLength();
        for (int k = from; k < to; k++) {
            char c = chars[k];
            if (Character.isSurrogate(c)) {
                if (Character.isHighSurrogate(c) && k + 1 < to && Character.isLowSurrogate(chars[k + 1])) {
                    k++;
                } else {
                    return true;
                }
            }
        }
        return false;
    }

    /** Field {@code i}'s value (token {@code t}, not null) as its declared type, as Spark's column holds it. */
    private static Object field(JsonParser p, JsonToken t, Spec s, int i) throws java.io.IOException, NotItsType {
        int kind = s.kinds[i];
        switch (kind) {
            case BIGINT: case INT: case SMALLINT: case TINYINT: {
                if (t != JsonToken.VALUE_NUMBER_INT || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                    throw new NotItsType("not an integer in range");
                }
                long v = p.getLongValue();
                if (v < RANGES[kind][0] || v > RANGES[kind][1]) {
                    throw new NotItsType("out of range");
                }
                return kind == BIGINT ? (Object) v : kind == INT ? (Object) (int) v
                        : kind == SMALLINT ? (Object) (short) v : (Object) (byte) v;
            }
            case DOUBLE: case FLOAT: {
                if (t != JsonToken.VALUE_NUMBER_INT && t != JsonToken.VALUE_NUMBER_FLOAT) {
                    throw new NotItsType("not a number");
                }
                double d = p.getDoubleValue();
                if (!Double.isFinite(d) || (kind == FLOAT && Math.abs(d) > FLOAT_MAX)) {
                    throw new NotItsType("not finite");
                }
                return kind == DOUBLE ? (Object) d : (Object) p.getFloatValue();  // as Spark's from_json reads it
            }
            case STRING:
                if (t != JsonToken.VALUE_STRING) {
                    throw new NotItsType("not a string");
                }
                if (hasLoneSurrogate(p)) {
                    throw new NotItsType("a lone surrogate");
                }
                return p.getText();
            case BOOLEAN:
                if (t == JsonToken.VALUE_TRUE) {
                    return Boolean.TRUE;
                }
                if (t == JsonToken.VALUE_FALSE) {
                    return Boolean.FALSE;
                }
                throw new NotItsType("not a boolean");
            case TIMESTAMP: {
                if (t != JsonToken.VALUE_STRING || !s.timestamp.matcher(p.getText()).matches()) {
                    throw new NotItsType("not a timestamp");
                }
                return timestampMillis(p.getText());
            }
            case DATE: {
                String text = t == JsonToken.VALUE_STRING ? p.getText() : null;
                if (text == null || !s.date.matcher(text).matches()) {
                    throw new NotItsType("not a date");
                }
                try {
                    return LocalDate.of(number(text, 0, 4), number(text, 5, 7), number(text, 8, 10)).toEpochDay()
                            * 86_400_000L;
                } catch (DateTimeException e) {
                    throw new NotItsType("not a date");
                }
            }
            default: {  // DECIMAL(p,s): exactly, never rounded (lowwater.io.fields._read_decimal)
                if (t != JsonToken.VALUE_NUMBER_INT && t != JsonToken.VALUE_NUMBER_FLOAT) {
                    throw new NotItsType("not a number");
                }
                BigDecimal exact = p.getDecimalValue();
                int scale = s.scale[i];
                if (exact.precision() - exact.scale() - 1 >= s.precision[i] - scale) {
                    throw new NotItsType("too many integer digits");
                }
                BigDecimal held;
                try {
                    held = exact.setScale(scale, java.math.RoundingMode.UNNECESSARY);
                } catch (ArithmeticException e) {
                    throw new NotItsType("too many places");
                }
                if (held.abs().compareTo(s.bound[i]) >= 0) {
                    throw new NotItsType("too many integer digits");
                }
                return held;
            }
        }
    }

    private static int number(String text, int from, int to) {
        return Integer.parseInt(text, from, to, 10);
    }

    /** Epoch milliseconds of a matched timestamp text, as lowwater.io.fields._timestamp_millis reads it. */
    private static long timestampMillis(String text) throws NotItsType {
        int hour = 0, minute = 0, second = 0, micro = 0, offsetMinutes = 0;
        String time = text.length() > 11 ? text.substring(11) : "";
        if (!time.isEmpty()) {
            hour = number(time, 0, 2);
            if (time.length() > 2) {
                minute = number(time, 3, 5);
            }
            if (time.length() > 5) {
                second = number(time, 6, 8);
                String rest = time.substring(8);
                if (rest.startsWith(".")) {
                    int digits = 1;
                    while (digits < rest.length() && rest.charAt(digits) >= '0' && rest.charAt(digits) <= '9') {
                        digits++;
                    }
                    String fraction = (rest.substring(1, digits) + "000000").substring(0, 6);
                    micro = number(fraction, 0, 6);
                    rest = rest.substring(digits);
                }
                if (!rest.isEmpty() && !rest.equals("Z")) {
                    int minutes = number(rest, 1, 3) * 60 + (rest.length() > 3 ? number(rest, rest.length() - 2,
                            rest.length()) : 0);
                    offsetMinutes = rest.charAt(0) == '-' ? -minutes : minutes;
                }
            }
        }
        try {
            LocalDateTime local = LocalDateTime.of(number(text, 0, 4), number(text, 5, 7), number(text, 8, 10),
                    hour, minute, second, micro * 1000);
            long seconds = local.toEpochSecond(ZoneOffset.ofTotalSeconds(offsetMinutes * 60));
            return Math.addExact(Math.multiplyExact(seconds, 1000L), micro / 1000);
        } catch (DateTimeException | ArithmeticException e) {
            throw new NotItsType("not a timestamp");
        }
    }
}
