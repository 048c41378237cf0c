"""The share coordinator: durable share-partition state as records on the state topic."""
