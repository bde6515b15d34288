// pgJDBC against a Millpond server: run by crates/server/tests/jdbc.rs as
// `java -cp postgresql.jar JdbcSmoke.java HOST:PORT`. Every check throws on a
// mismatch (exit status 1, the message on stderr); "ok" on stdout at the end.
import java.math.BigDecimal;
import java.sql.*;
import java.util.*;

public class JdbcSmoke {
    static void check(boolean holds, String what) {
        if (!holds) throw new AssertionError(what);
    }

    public static void main(String[] args) throws Exception {
        String base = "jdbc:postgresql://" + args[0] + "/millpond";
        try (Connection c = DriverManager.getConnection(base, "millpond", "")) {
            extended(c);
        }
        try (Connection c = DriverManager.getConnection(base + "?preferQueryMode=simple", "millpond", "")) {
            simple(c);
        }
        System.out.println("ok");
    }

    static void extended(Connection c) throws Exception {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE item (id BIGINT PRIMARY KEY, name TEXT, price NUMERIC(10,2), ts TIMESTAMP, dt DATE)");
            s.execute("CREATE MATERIALIZED VIEW per_name AS SELECT name, COUNT(*) AS n, SUM(price) AS total FROM item GROUP BY name");
        }
        Timestamp at = Timestamp.valueOf("2024-05-06 07:08:09");
        java.sql.Date day = java.sql.Date.valueOf("2024-05-06");
        // Seven executions: past pgJDBC's prepareThreshold (5) it uses a named
        // server-side statement and binary parameters (NUMERIC included).
        try (PreparedStatement p = c.prepareStatement("INSERT INTO item (id, name, price, ts, dt) VALUES (?, ?, ?, ?, ?)")) {
            for (int i = 1; i <= 7; i++) {
                p.setLong(1, i);
                p.setString(2, i % 2 == 0 ? "even" : "odd");
                p.setBigDecimal(3, new BigDecimal(i + ".25"));
                p.setTimestamp(4, at);
                p.setDate(5, day);
                check(p.executeUpdate() == 1, "INSERT " + i + " counts one row");
            }
        }
        try (PreparedStatement p = c.prepareStatement("SELECT name, price, ts, dt FROM item WHERE id = ?")) {
            for (int i = 1; i <= 7; i++) {
                p.setLong(1, i);
                try (ResultSet r = p.executeQuery()) {
                    check(r.next(), "row " + i + " is there");
                    check(r.getString(1).equals(i % 2 == 0 ? "even" : "odd"), "name of " + i);
                    check(r.getBigDecimal(2).compareTo(new BigDecimal(i + ".25")) == 0, "price of " + i + ": " + r.getBigDecimal(2));
                    check(r.getTimestamp(3).equals(at), "timestamp of " + i + ": " + r.getTimestamp(3));
                    check(r.getDate(4).toString().equals("2024-05-06"), "date of " + i + ": " + r.getDate(4));
                    check(!r.next(), "one row for id " + i);
                }
            }
        }
        // The view covers this connection's writes when read (read-your-writes).
        try (PreparedStatement p = c.prepareStatement("SELECT n, total FROM per_name WHERE name = ?")) {
            p.setString(1, "odd");
            try (ResultSet r = p.executeQuery()) {
                check(r.next() && r.getLong(1) == 4, "four odd rows in the view");
                check(r.getBigDecimal(2).compareTo(new BigDecimal("17.00")) == 0, "their total: " + r.getBigDecimal(2));
            }
        }
        c.setAutoCommit(false);
        try (Statement s = c.createStatement()) {
            check(s.executeUpdate("INSERT INTO item (id, name) VALUES (100, 'txn')") == 1, "insert in a block");
        }
        c.commit();
        try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT COUNT(*) FROM item")) {
            check(r.next() && r.getLong(1) == 8, "the committed block's row is there");
        }
        c.rollback(); // nothing written since the block began: honoured
        try (Statement s = c.createStatement()) {
            s.executeUpdate("INSERT INTO item (id, name) VALUES (101, 'kept')");
        }
        try {
            c.rollback();
            check(false, "a rollback after a write is refused, not pretended");
        } catch (SQLException e) {
            check("0A000".equals(e.getSQLState()), "rollback after a write: " + e.getSQLState() + " " + e.getMessage());
        }
        c.setAutoCommit(true);
        check(c.getTransactionIsolation() == Connection.TRANSACTION_READ_COMMITTED, "read committed");
        DatabaseMetaData meta = c.getMetaData();
        Map<String, String> tables = new TreeMap<>();
        try (ResultSet r = meta.getTables(null, "public", "%", null)) {
            while (r.next()) tables.put(r.getString("TABLE_NAME"), r.getString("TABLE_TYPE"));
        }
        check(tables.equals(Map.of("item", "TABLE", "per_name", "MATERIALIZED VIEW")), "getTables: " + tables);
        List<String> columns = new ArrayList<>();
        try (ResultSet r = meta.getColumns(null, "public", "item", null)) {
            while (r.next()) columns.add(r.getString("COLUMN_NAME") + ":" + r.getString("TYPE_NAME"));
        }
        check(columns.equals(List.of("id:int8", "name:text", "price:numeric", "ts:timestamp", "dt:date")), "getColumns: " + columns);
    }

    static void simple(Connection c) throws Exception {
        // The simple mode puts parameters into the SQL text: a timestamp with its zone offset.
        try (PreparedStatement p = c.prepareStatement("INSERT INTO item (id, name, ts, dt) VALUES (?, ?, ?, ?)")) {
            p.setLong(1, 200);
            p.setString(2, "simple");
            p.setTimestamp(3, Timestamp.valueOf("2024-01-02 03:04:05.5"));
            p.setDate(4, java.sql.Date.valueOf("2024-01-02"));
            check(p.executeUpdate() == 1, "simple-mode INSERT");
        }
        try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT ts, dt FROM item WHERE id = 200")) {
            check(r.next(), "the simple-mode row is there");
            check(r.getTimestamp(1).equals(Timestamp.valueOf("2024-01-02 03:04:05.5")), "its timestamp: " + r.getTimestamp(1));
            check(r.getDate(2).toString().equals("2024-01-02"), "its date: " + r.getDate(2));
        }
    }
}
