// Prints Kafka's broker and group config definitions as JSON lines, one per config, for
// gen_kafka_configs.py: name, type, default, validator, whether Kafka keeps it internal, the
// dynamic update mode and the broker synonyms of a broker config, the broker synonym of a group
// config. A broker config only the dynamic layer knows (the replication throttles) is
// "broker-dynamic": Kafka takes it but describes it only once set. Run against the jars of the pinned Kafka (tests/kafka-reference/lib).
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.coordinator.group.GroupConfig;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;
import org.apache.kafka.server.config.DynamicConfig;

public class DumpConfigs {
    private static String json(Object value) {
        if (value == null) {
            return "null";
        }
        String text = value.toString().replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
        return "\"" + text + "\"";
    }

    private static void print(String kind, ConfigDef.ConfigKey key, boolean internal, String extra) {
        String value = key.hasDefault() ? ConfigDef.convertToString(key.defaultValue, key.type) : null;
        System.out.println("{\"kind\":" + json(kind) + ",\"name\":" + json(key.name) + ",\"type\":" + json(key.type)
            + ",\"default\":" + json(value) + ",\"validator\":" + json(key.validator)
            + ",\"internal\":" + internal + extra + "}");
    }

    public static void main(String[] args) {
        Map<String, String> modes = DynamicBrokerConfig.dynamicConfigUpdateModes();
        Map<String, ConfigDef.ConfigKey> broker = AbstractKafkaConfig.CONFIG_DEF.configKeys();
        for (ConfigDef.ConfigKey key : broker.values()) {
            List<String> synonyms = DynamicBrokerConfig.brokerConfigSynonyms(key.name, false);
            print("broker", key, key.internalConfig,
                ",\"mode\":" + json(modes.get(key.name)) + ",\"synonyms\":" + json(String.join(",", synonyms)));
        }
        for (ConfigDef.ConfigKey key : DynamicConfig.Broker.configKeys().values()) {
            if (!broker.containsKey(key.name)) {
                print("broker-dynamic", key, key.internalConfig,
                    ",\"mode\":" + json(modes.get(key.name)) + ",\"synonyms\":" + json(key.name));
            }
        }
        for (ConfigDef.ConfigKey key : GroupConfig.CONFIG_DEF.configKeys().values()) {
            print("group", key, GroupConfig.isInternal(key.name),
                ",\"synonym\":" + json(GroupConfig.brokerSynonym(key.name).orElse(null)));
        }
    }
}
