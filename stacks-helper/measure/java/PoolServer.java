import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

/** GET /bytes/N on 127.0.0.1:PORT. "pool": each exchange is handed to a 4-thread executor;
 *  "direct": the HTTP server's dispatcher thread answers itself. For checking JVM frame names. */
public class PoolServer {
    static final byte[] ALPHABET = "abcdefghijklmnopqrstuvwxyz".getBytes();

    static void handle(HttpExchange ex) throws java.io.IOException {
        byte[] body = new byte[100];
        for (int i = 0; i < body.length; i++) body[i] = ALPHABET[i % 26];
        ex.getResponseHeaders().set("Content-Type", "application/octet-stream");
        ex.sendResponseHeaders(200, body.length);
        try (OutputStream os = ex.getResponseBody()) { os.write(body); }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
        server.createContext("/", PoolServer::handle);
        if (args.length > 1 && args[1].equals("pool")) server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
    }
}
