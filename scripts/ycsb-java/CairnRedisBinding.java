/*
 * A YCSB DB binding for RESP servers, used by scripts/ycsb_java.sh because
 * YCSB's own redis-binding jar (site.ycsb:redis-binding) is not published on
 * Maven Central (only site.ycsb:core is). It issues, through Jedis 2.9.0
 * (the Jedis version YCSB 0.17.0 builds its binding with, per the
 * redis.version property of site.ycsb:root:0.17.0), the same commands as
 * YCSB's RedisClient, so the Java side costs what YCSB's client costs:
 *
 *   insert: HMSET <key> <field> <value> ...; then, if the reply is OK,
 *           ZADD _indices <Java String.hashCode(key)> <key>
 *   read:   HGETALL <key> (all fields) or HMGET <key> <field> ...;
 *           an empty result is an error (Status.ERROR)
 *   update: HMSET <key> <field> <value> ...
 *   scan:   ZRANGEBYSCORE _indices <hashCode(startkey)> +inf LIMIT 0 <n>,
 *           then a read of every key returned
 *   delete: DEL <key>, ZREM _indices <key>
 *
 * Properties: redis.host, redis.port (6379), redis.password, redis.timeout
 * (milliseconds, Jedis's default 2000), as YCSB's binding. Cluster mode is
 * not supported. If the official binding jar is at hand (from YCSB's
 * release tarball), scripts/ycsb_java.sh uses it instead: set
 * YCSB_REDIS_BINDING_JAR.
 */
package cairn.ycsb;

import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import redis.clients.jedis.Jedis;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/** One instance per YCSB client thread, each with its own connection. */
public class CairnRedisBinding extends DB {
  private static final String INDEX = "_indices";
  private Jedis conn;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String host = p.getProperty("redis.host", "127.0.0.1");
    int port = Integer.parseInt(p.getProperty("redis.port", "6379"));
    String timeout = p.getProperty("redis.timeout");
    conn = timeout == null ? new Jedis(host, port) : new Jedis(host, port, Integer.parseInt(timeout));
    try {
      conn.connect();
      String password = p.getProperty("redis.password");
      if (password != null) {
        conn.auth(password);
      }
    } catch (RuntimeException e) {
      throw new DBException("cannot connect to " + host + ":" + port + ": " + e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    conn.close();
  }

  /** The score of a key in the scan index, as YCSB's binding computes it. */
  private static double score(String key) {
    return key.hashCode();
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    if (fields == null) {
      StringByteIterator.putAllAsByteIterators(result, conn.hgetAll(key));
    } else {
      String[] names = fields.toArray(new String[0]);
      List<String> values = conn.hmget(key, names);
      Iterator<String> v = values.iterator();
      for (String f : names) {
        if (!v.hasNext()) {
          break;
        }
        result.put(f, new StringByteIterator(v.next()));
      }
    }
    return result.isEmpty() ? Status.ERROR : Status.OK;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    Set<String> keys = conn.zrangeByScore(INDEX, score(startkey), Double.POSITIVE_INFINITY, 0, recordcount);
    for (String k : keys) {
      HashMap<String, ByteIterator> one = new HashMap<>();
      read(table, k, fields, one);
      result.add(one);
    }
    return Status.OK;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return "OK".equals(conn.hmset(key, StringByteIterator.getStringMap(values))) ? Status.OK : Status.ERROR;
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    if (!"OK".equals(conn.hmset(key, StringByteIterator.getStringMap(values)))) {
      return Status.ERROR;
    }
    conn.zadd(INDEX, score(key), key);
    return Status.OK;
  }

  @Override
  public Status delete(String table, String key) {
    boolean gone = conn.del(key) > 0;
    boolean unindexed = conn.zrem(INDEX, key) > 0;
    return gone || unindexed ? Status.OK : Status.ERROR;
  }
}
