import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

/**
 * GET /bytes/N: N bytes of the alphabet, on the JDK's own HTTP server (com.sun.net.httpserver), on
 * 127.0.0.1:PORT. MODE "pool": each exchange is handed by the server's dispatcher thread to a 4-thread
 * executor (the JDK's documented way to serve in parallel, and the common Java pattern of dispatching each
 * request to a worker pool); "direct": the dispatcher thread answers itself (no executor set).
 *
 *     java JdkHttpBytes PORT pool|direct
 */
public class JdkHttpBytes {
    static final byte[] ALPHABET = "abcdefghijklmnopqrstuvwxyz".getBytes();

    static void handle(HttpExchange ex) throws java.io.IOException {
        int n = 100;
        String path = ex.getRequestURI().getPath();
        if (path.startsWith("/bytes/")) {
            try {
                n = Math.max(0, Math.min(1 << 20, Integer.parseInt(path.substring(7))));
            } catch (NumberFormatException e) {
                n = 100;
            }
        }
        byte[] body = new byte[n];
        for (int i = 0; i < n; i++) body[i] = ALPHABET[i % 26];
        ex.getResponseHeaders().set("Content-Type", "application/octet-stream");
        ex.sendResponseHeaders(200, n);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(body);
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
        server.createContext("/", JdkHttpBytes::handle);
        if (args.length > 1 && args[1].equals("pool")) server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
        System.out.println("listening on " + port);
    }
}
