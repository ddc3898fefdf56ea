import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import org.jboss.threads.EnhancedQueueExecutor;

/**
 * JdkHttpBytes's server with each exchange handed to a pool of jboss-threads (EnhancedQueueExecutor, 4
 * threads: WildFly's and JBoss's pool library), the verdict pairs' JVM pool library that no code of the analyzer
 * names; its good side is JdkHttpBytes "direct".
 *
 *     java -cp ...:jboss-threads.jar JbossPoolBytes PORT
 */
public class JbossPoolBytes {
    public static void main(String[] args) throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])), 128);
        server.createContext("/", JdkHttpBytes::handle);
        server.setExecutor(new EnhancedQueueExecutor.Builder().setCorePoolSize(4).setMaximumPoolSize(4).build());
        server.start();
        System.out.println("listening on " + args[0]);
    }
}
