mod stage;
